package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuClock reads the CPU time used so far by this process (the consumers and
// the in-process kfake broker) and by the PostgreSQL server (the postmaster,
// its live children, and the children it has reaped).
type cpuClock struct{ postmaster int }

// newCPUClock finds the postmaster of the server whose data directory is
// dataDir; server times read as zero when it cannot.
func newCPUClock(dataDir string) cpuClock {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return cpuClock{}
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return cpuClock{postmaster: pid}
}

func (c cpuClock) read() (self, server time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if c.postmaster == 0 {
		return self, 0
	}
	const tick = time.Second / 100 // USER_HZ, the unit of /proc/<pid>/stat times
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile; its time is in the postmaster's cutime
		}
		s := string(b)
		// The command name is in parentheses and may hold spaces; fields
		// after it start with state (index 0), ppid (1), ... utime (11),
		// stime (12), cutime (13), cstime (14).
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 15 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); pid != c.postmaster && ppid != c.postmaster {
			continue
		}
		for _, v := range f[11:15] {
			t, _ := strconv.ParseInt(v, 10, 64)
			server += time.Duration(t) * tick
		}
	}
	return self, server
}
