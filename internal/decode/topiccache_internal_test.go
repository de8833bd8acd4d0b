package decode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// cacheTopics is how many distinct topics rows name in the test.
const cacheTopics = 2000

// The decoder's topic cache stays within its bounds, in names and bytes,
// whatever aggregate types rows hold: 2,000 distinct legal ones, 2,000
// distinct 300 kB ones (illegal: never cached) and 2,000 explicit topics.
func TestTopicCacheBounded(t *testing.T) {
	t.Parallel()
	var c topicCache
	tmpl := tableformat.ParseTopicTemplate(relaytype.DefaultTopicTemplate)
	huge := []byte(strings.Repeat("x", 300_000))
	for i := range cacheTopics {
		copy(huge, fmt.Sprintf("%08d", i))
		if _, err := c.rendered(&tmpl, huge, []byte("e")); err == nil {
			t.Fatal("a 300 kB topic passed")
		}
	}
	if names, bytes := c.size(); names != 0 {
		t.Fatalf("%d illegal names cached (%d bytes), want none", names, bytes)
	}
	for i := range cacheTopics {
		at := fmt.Appendf(nil, "type-%d-%s", i, strings.Repeat("a", 200))
		if topic, err := c.rendered(&tmpl, at, []byte("e")); err != nil || topic != "outbox."+string(at) {
			t.Fatalf("type %d: topic %q, %v", i, topic, err)
		}
		explicit := fmt.Appendf(nil, "explicit-%d-%s", i, strings.Repeat("b", 230))
		if topic, err := c.explicit(explicit); err != nil || topic != string(explicit) {
			t.Fatalf("explicit topic %d: %q, %v", i, topic, err)
		}
	}
	names, bytes := c.size()
	const maxBytes = 2 * topicCacheSize * (topicCacheKeyBytes + 249)
	if names > 2*topicCacheSize || bytes > maxBytes {
		t.Fatalf("topic cache holds %d names, %d bytes; want at most %d, %d", names, bytes, 2*topicCacheSize, maxBytes)
	}
	t.Logf("topic cache after %d distinct legal, %d illegal and %d explicit topics: %d names, %d bytes of keys and values",
		cacheTopics, cacheTopics, cacheTopics, names, bytes)
}
