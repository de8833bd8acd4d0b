package streamconn_test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
