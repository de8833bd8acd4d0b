// Package loophook joins package inbox and its Kafka consumer loop
// (package inboxkafka) without exporting the inbox's machinery and without
// package-level state. Each *inbox.Inbox embeds a Hook under an unexported
// name; the Hook's only method is unexported here, so it adds nothing to
// the Inbox's API, yet it is promoted to the Inbox and lets Internals find
// the Hook of the Inbox it is given. The loop types what Internals returns
// by an interface of its own. Nothing outside pkg/inbox can import it.
package loophook
