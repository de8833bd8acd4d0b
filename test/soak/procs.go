package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process kept running: when it exits (a SIGKILL, a
// deposed relay that stops) it is started again, until stop.
type proc struct {
	name    string
	newCmd  func() *exec.Cmd
	onStart func(cmd *exec.Cmd) // wires the new process's pipes; may be nil

	mu       sync.Mutex
	cmd      *exec.Cmd
	restarts int
	stopping bool
	wg       sync.WaitGroup
}

// start starts the process and its supervisor.
func (p *proc) start() error {
	if err := p.spawn(); err != nil {
		return err
	}
	return nil
}

func (p *proc) spawn() error {
	cmd := p.newCmd()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.onStart != nil {
		p.onStart(cmd)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	p.wg.Go(func() {
		_ = cmd.Wait()
		p.mu.Lock()
		stopping := p.stopping
		if !stopping {
			p.restarts++
		}
		p.mu.Unlock()
		if stopping {
			return
		}
		// A relay that exits at once (the database restarting) is not
		// restarted in a tight loop.
		time.Sleep(500 * time.Millisecond)
		if err := p.spawn(); err != nil {
			fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		}
	})
	return nil
}

// pid is the running process's PID.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the running process. Through os.Process, which
// sends nothing to a process already waited for: its PID may be another
// process's by now.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// stop ends the process with SIGTERM (SIGKILL after 20s) and its
// supervisor.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopping = true
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
		defer t.Stop()
	}
	p.wg.Wait()
}

// usage is what the soak samples of a process.
type usage struct {
	rssBytes   int64
	fds        int
	goroutines int
	leader     bool
}

// sample reads a process's resident memory and open files from /proc and,
// when metricsURL is set, its goroutines and leadership from /metrics.
func sample(ctx context.Context, pid int, metricsURL string) usage {
	var u usage
	if pid <= 0 {
		return u
	}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				u.rssBytes = kb << 10
			}
		}
		f.Close()
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		u.fds = len(ents)
	}
	if metricsURL == "" {
		return u
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return u
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch {
		case name == "go_goroutines":
			n, _ := strconv.ParseFloat(value, 64)
			u.goroutines = int(n)
		case strings.HasPrefix(name, "pgoutbox_relay_leader"):
			u.leader = strings.TrimSpace(value) == "1"
		}
	}
	return u
}
