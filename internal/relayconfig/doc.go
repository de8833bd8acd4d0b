// Package relayconfig holds the relay's Config, its defaults and its
// validation, and the topic template. Package relay exposes Config and
// its constants under their own names.
package relayconfig
