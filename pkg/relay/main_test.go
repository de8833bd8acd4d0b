package relay_test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithDatabase(m) } // DATABASE_URL for the examples
