package fleet

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// At start a replica says which principals the ACLs let join its spread
// group: a warning naming a principal other than the relay's (a consumer
// given Read on a prefix the group falls under), or every principal.
func TestSpreadChecksTheGroupsACLs(t *testing.T) {
	const group = "orders-fleet"
	readGroup := func(name string, pattern kmsg.ACLResourcePatternType) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: name, Pattern: pattern, Operation: kmsg.ACLOperationRead, Allow: true}
	}
	describeCluster := kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true}
	for _, tc := range []struct {
		name  string
		other []kfake.ACL
		want  []string
	}{
		{"only the relay", nil, []string{"level=INFO", "principals=User:relay"}},
		{"a prefix the group falls under", []kfake.ACL{readGroup("orders", kmsg.ACLResourcePatternTypePrefixed)},
			[]string{"level=WARN", "principals other than the relay's", "others=User:consumer", "spread: secret-file:"}},
		{"another group's", []kfake.ACL{readGroup("billing", kmsg.ACLResourcePatternTypePrefixed), readGroup("orders-fleet-2", kmsg.ACLResourcePatternTypeLiteral)},
			[]string{"level=INFO", "principals=User:relay"}},
		{"every group", []kfake.ACL{readGroup("*", kmsg.ACLResourcePatternTypeLiteral)},
			[]string{"level=WARN", "others=User:consumer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kafka := testenv.NewKafka(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin-pw"),
				kfake.User("PLAIN", "relay", "relay-pw", readGroup(group, kmsg.ACLResourcePatternTypeLiteral), describeCluster),
				kfake.User("PLAIN", "consumer", "consumer-pw", tc.other...))
			cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.Brokers...), kgo.SASL(plain.Auth{User: "relay", Pass: "relay-pw"}.AsMechanism()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var logs strings.Builder
			m := &member{sp: &spread{group: group}, logger: slog.New(slog.NewTextHandler(&logs, nil))}
			m.checkACLs(context.Background(), cl, principal(&kafkasasl.Config{Mechanism: kafkasasl.Plain, Username: "relay"}))
			for _, w := range tc.want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("the ACL check's log does not say %q:\n%s", w, logs.String())
				}
			}
		})
	}
}
