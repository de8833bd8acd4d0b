// Package awsmsk builds the AWS_MSK_IAM SASL mechanism of
// kafkasasl.Config with the AWS SDK for Go v2. Importing it registers the
// builder, as a database/sql driver registers itself:
//
//	import _ "github.com/pgoutbox/pgoutbox/pkg/kafkasasl/awsmsk"
//
// It is a package of its own so that only programs that ask for
// AWS_MSK_IAM link the AWS SDK (package relay imports it; an inbox
// consumer imports it when it authenticates to Amazon MSK with IAM).
//
// With a SASL username the static keys sign (the username is the access
// key ID, the password the secret access key, with the session token).
// Without one, the SDK's default credential chain: the environment, the
// shared config and credentials files, web identity, ECS container
// credentials, then the EC2 instance metadata service; credentials are
// cached by the SDK until shortly before they expire. The source that
// gave them is logged once (slog.Default), never the credentials.
package awsmsk
