package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// debeziumServerMain is Debezium Server's main class.
const debeziumServerMain = "io.debezium.server.Main"

// debeziumServerJava is the oldest Java that runs Debezium Server 3.6
// (its classes are Java 21's).
const debeziumServerJava = 21

// DebeziumServerDir returns the directory of the unpacked Debezium Server
// distribution pinned in test/debezium-server/pom.xml (its runner jar,
// lib/ with the connectors and every sink), fetching it with Maven and
// unpacking it into the cache first if need be (about 780 MB to fetch,
// once). Concurrent callers take a file lock, so one unpacks.
func DebeziumServerDir(ctx context.Context) (string, error) {
	libs, err := mavenLibs(ctx, "debezium-server", "debezium.version")
	if err != nil {
		return "", fmt.Errorf("debezium server: %w", err)
	}
	root := filepath.Join(filepath.Dir(libs), "server")
	err = makeOnce(filepath.Dir(libs), filepath.Join(root, "complete"), func() error {
		dists, _ := filepath.Glob(filepath.Join(libs, "debezium-server-dist-*.tar.gz"))
		if len(dists) != 1 {
			// The archive is removed once unpacked: a cache whose
			// unpacked copy is gone must be fetched again.
			return fmt.Errorf("debezium server: want one distribution in %s, found %d: remove %s to fetch it again", libs, len(dists), filepath.Dir(libs))
		}
		_ = os.RemoveAll(root)
		tmp := root + ".tmp"
		_ = os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		if out, err := exec.CommandContext(ctx, "tar", "-xzf", dists[0], "-C", tmp).CombinedOutput(); err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("debezium server: unpack %s: %v: %s", dists[0], err, out)
		}
		if err := os.Rename(filepath.Join(tmp, "debezium-server"), root); err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("debezium server: the distribution has no debezium-server directory: %w", err)
		}
		_ = os.RemoveAll(tmp)
		// Unpacked, the archive is of no more use (Maven's own copy
		// stays in ~/.m2).
		_ = os.Remove(dists[0])
		return os.WriteFile(filepath.Join(root, "complete"), nil, 0o644)
	})
	return root, err
}

// DebeziumServerJava returns the java command RunDebeziumServer runs
// (Java 21 or newer), or an error that says there is none.
func DebeziumServerJava() (string, error) {
	java, err := javaOf(debeziumServerJava)
	if err != nil {
		return "", fmt.Errorf("debezium server: %w", err)
	}
	return java, nil
}

// javaOf returns a java command of version min or newer: $JAVA_HOME's,
// the one on PATH, or one under /usr/lib/jvm (a JDK installed beside the
// default), in that order.
func javaOf(min int) (string, error) {
	var candidates []string
	if home := os.Getenv("JAVA_HOME"); home != "" {
		candidates = append(candidates, filepath.Join(home, "bin", "java"))
	}
	if p, err := exec.LookPath("java"); err == nil {
		candidates = append(candidates, p)
	}
	installed, _ := filepath.Glob("/usr/lib/jvm/*/bin/java")
	candidates = append(candidates, installed...)
	var seen []string
	for _, java := range candidates {
		out, err := exec.Command(java, "-XshowSettings:properties", "-version").CombinedOutput()
		if err != nil {
			continue
		}
		m := regexp.MustCompile(`java\.specification\.version = (\d+)`).FindSubmatch(out)
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(string(m[1]))
		if v >= min {
			return java, nil
		}
		seen = append(seen, fmt.Sprintf("%s (%d)", java, v))
	}
	return "", fmt.Errorf("no Java %d or newer: set JAVA_HOME to one (found %s)", min, strings.Join(append(seen, "nothing else"), ", "))
}

// RunDebeziumServer starts Debezium Server from the distribution in dist
// (DebeziumServerDir) with the configuration props (application.properties
// keys: debezium.source.*, debezium.sink.*, debezium.transforms.*,
// quarkus.*), written to dir/config/application.properties; the server
// runs in dir (its working directory), with jvmArgs. It returns once the
// JVM started, not once the connector streams; the caller ends it with
// Kill. Its output goes to Out and to dir/server.log.
func RunDebeziumServer(dist string, props map[string]string, dir string, jvmArgs ...string) (*Debezium, error) {
	java, err := DebeziumServerJava()
	if err != nil {
		return nil, err
	}
	runners, _ := filepath.Glob(filepath.Join(dist, "debezium-server-*runner.jar"))
	if len(runners) != 1 {
		return nil, fmt.Errorf("debezium server: want one runner jar in %s, found %d", dist, len(runners))
	}
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
		return nil, err
	}
	if err := writeProperties(filepath.Join(dir, "config", "application.properties"), props); err != nil {
		return nil, err
	}
	d := &Debezium{Out: &SyncBuffer{}, done: make(chan struct{})}
	cp := runners[0] + string(os.PathListSeparator) + filepath.Join(dist, "lib", "*")
	args := append(append([]string{}, jvmArgs...), "-cp", cp, debeziumServerMain)
	d.cmd = exec.Command(java, args...)
	d.cmd.Dir = dir
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	out := io.MultiWriter(d.Out, logf)
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = kafkaProcAttr()
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		d.err = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	return d, nil
}
