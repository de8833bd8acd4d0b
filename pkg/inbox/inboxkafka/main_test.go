package inboxkafka_test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestMain(m *testing.M) {
	if crashChildMain() {
		return
	}
	testenv.Main(m)
}
