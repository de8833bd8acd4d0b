package inbox_test

import (
	"os"
	"strings"
	"testing"
)

// The consumer loop docs/consumers.md shows is the one
// ExampleKafkaRecord_Message runs (the body of consume), so a user who
// pastes it gets the loop that test proves loses nothing.
func TestConsumersDocShowsTheExampleLoop(t *testing.T) {
	doc, err := os.ReadFile("../../docs/consumers.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "## Any Kafka client")
	if i < 0 {
		t.Fatal("docs/consumers.md has no Any Kafka client section")
	}
	s = s[i:]
	start := strings.Index(s, "```go\n")
	if start < 0 {
		t.Fatal("the Any Kafka client section has no Go block")
	}
	shown := s[start+len("```go\n"):]
	shown = shown[:strings.Index(shown, "```")]

	src, err := os.ReadFile("example_record_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	i = strings.Index(body, "\nfunc consume(")
	if i < 0 {
		t.Fatal("example_record_test.go has no consume function")
	}
	body = body[i:]
	body = body[strings.Index(body, ") error {\n")+len(") error {\n"):]
	body = body[:strings.Index(body, "\n}\n")+1]
	var want strings.Builder
	for _, l := range strings.SplitAfter(body, "\n") {
		want.WriteString(strings.TrimPrefix(l, "\t"))
	}
	if shown != want.String() {
		t.Errorf("docs/consumers.md's loop is not the body of consume in example_record_test.go:\n--- docs\n%s--- example\n%s", shown, want.String())
	}
}
