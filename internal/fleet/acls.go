package fleet

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// principal is the Kafka principal the relay authenticates as, when its
// settings say (a PLAIN or SCRAM user): "User:NAME"; empty otherwise (TLS
// client certificates, OAUTHBEARER, AWS IAM name it on the broker's side).
func principal(sasl *kafkasasl.Config) string {
	if sasl == nil || sasl.Username == "" {
		return ""
	}
	switch sasl.Mechanism {
	case kafkasasl.Plain, kafkasasl.SCRAMSHA256, kafkasasl.SCRAMSHA512:
		return "User:" + sasl.Username
	}
	return ""
}

// checkACLs says at start which principals the cluster's ACLs let join
// the spread group (Read on the group, by a literal, prefixed or wildcard
// pattern), where the relay may describe them: a warning when the cluster
// has no authorizer, when every principal (User:*) may, or when a
// principal other than the relay's own (self, when known) may; otherwise
// the list, at info. It refuses nothing: the ACLs are the operator's, and
// the fleet secret guards the group where they are missing.
func (m *member) checkACLs(ctx context.Context, admin *kgo.Client, self string) {
	req := kmsg.NewPtrDescribeACLsRequest()
	// Every group ACL, matched here as Kafka matches them (a broker's
	// MATCH filter would do, but not every broker implements it).
	req.ResourceType = kmsg.ACLResourceTypeGroup
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	secured := "; spread: secret-file: keeps other clients from taking sources"
	if m.proving != nil {
		secured = "; the fleet secret keeps them from taking sources"
	}
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		m.logger.Warn("spread: the Kafka cluster has no authorizer: any client that reaches it may join the group "+m.sp.group+secured+" (docs/fleet.md)", "group", m.sp.group)
		return
	case err != nil:
		m.logger.Info("spread: the group's ACLs were not checked (describing ACLs needs Describe on the cluster)", "group", m.sp.group, "error", err)
		return
	}
	allowed, denied := map[string]bool{}, map[string]bool{}
	for _, r := range resp.Resources {
		if !aclMatches(r.ResourceName, r.ResourcePatternType, m.sp.group) {
			continue
		}
		for _, a := range r.ACLs {
			if a.Operation != kmsg.ACLOperationRead && a.Operation != kmsg.ACLOperationAll {
				continue
			}
			if a.PermissionType == kmsg.ACLPermissionTypeAllow {
				allowed[a.Principal] = true
			} else {
				denied[a.Principal] = true
			}
		}
	}
	var may []string
	for p := range allowed {
		if !denied[p] {
			may = append(may, p)
		}
	}
	slices.Sort(may)
	others := slices.DeleteFunc(slices.Clone(may), func(p string) bool { return p == self })
	switch {
	case slices.Contains(may, "User:*"):
		m.logger.Warn("spread: the ACLs let every principal (User:*) join the group "+m.sp.group+secured+" (docs/fleet.md)", "group", m.sp.group)
	case self != "" && len(others) > 0:
		m.logger.Warn("spread: the ACLs let principals other than the relay's join the group "+m.sp.group+secured+" (docs/fleet.md)",
			"group", m.sp.group, "relay", self, "others", strings.Join(others, ","))
	default:
		m.logger.Info("spread: principals the ACLs let join the group (superusers aside)", "group", m.sp.group, "principals", strings.Join(may, ","))
	}
}

// aclMatches reports whether an ACL's resource pattern covers name: a
// literal of the name or the wildcard *, or a prefix of it.
func aclMatches(resource string, pattern kmsg.ACLResourcePatternType, name string) bool {
	switch pattern {
	case kmsg.ACLResourcePatternTypeLiteral:
		return resource == name || resource == "*"
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, resource)
	}
	return false
}
