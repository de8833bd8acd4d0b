// Package kafkasasl is the SASL configuration that the relay's and the
// inbox's Kafka clients authenticate with: one struct, Config, read by
// both, and KafkaMechanism, which turns it into a franz-go
// sasl.Mechanism for kgo.SASL.
//
// It is a leaf: it imports franz-go's SASL packages and nothing of the
// relay's engine, so a consumer that embeds the inbox links no
// replication client. AWS_MSK_IAM, which needs the AWS SDK, lives in the
// subpackage awsmsk, as franz-go keeps it in sasl/aws: import it (for its
// side effect) where AWS_MSK_IAM is wanted. Package relay imports it, so
// the relay always speaks AWS_MSK_IAM; an inbox consumer opts in:
//
//	import _ "github.com/pgoutbox/pgoutbox/pkg/kafkasasl/awsmsk"
//
// # Secrets
//
// No error of this package carries a credential, and nothing here logs
// one.
package kafkasasl
