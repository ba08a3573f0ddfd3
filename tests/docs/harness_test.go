package docs_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// TestMain runs the tests isolated from the developer's NATS setup
// (testenv.RunIsolated) and removes the programs it built.
func TestMain(m *testing.M) {
	code := testenv.RunIsolated(m)
	if binDir != "" {
		_ = os.RemoveAll(filepath.Dir(binDir))
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries runs `make build` once, as the README tells a newcomer to, with
// only its output folder (BIN) moved to a temporary one, and returns that
// folder: it holds the executor and the emitter. Beside it, standIns() holds
// nsc, the tests' stand-in for it (internal/testkit/nscstandin).
func binaries(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolexec-docs-")
		if err != nil {
			binErr = err
			return
		}
		binDir = filepath.Join(dir, "bin")
		cmd := exec.Command("make", "build", "BIN="+binDir)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("make build: %v\n%s", err, out)
			return
		}
		cmd = exec.Command("go", "build", "-o", filepath.Join(standIns(), "nsc"), "./internal/testkit/nscstandin")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./internal/testkit/nscstandin: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// standIns is the folder of the programs that stand in for ones the tests
// cannot install; it goes first on the scripts' PATH.
func standIns() string { return filepath.Join(filepath.Dir(binDir), "stand-ins") }

// repoRoot is the absolute path of the repository.
func repoRoot(t testing.TB) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// docPorts are the ports the pages write. Each script gets a free port in
// place of each, in the commands it runs and in $PORT_<port>.
var docPorts = []string{"4222", "8090", "8081", "9090"}

var portPattern = regexp.MustCompile(`(^|[^0-9])(` + strings.Join(docPorts, "|") + `)([^0-9]|$)`)

// freePort returns a port of 127.0.0.1 that nothing listens on (yet).
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// notLinked are the entries of the repository a script's folder does not
// link to: its own bin (the binaries make build made), and what a command of
// the pages writes (which then lands in the script's folder; .venv is the
// Python environment of "From Python").
var notLinked = map[string]bool{".git": true, "bin": true, ".toolexec": true, ".env": true, ".venv": true}

// script is the state of one running script.
type script struct {
	t     *testing.T        // the test running the scripts
	env   []string          // the environment Setup made, and what capture and setenv added
	ports map[string]string // page port -> free port
	cur   *block            // the block the commands of the script refer to
	creds string            // natscluster's credentials file
	bg    map[string]*bgProc
}

type bgProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

type scriptKey struct{}

func state(ts *testscript.TestScript) *script { return ts.Value(scriptKey{}).(*script) }

// setup prepares a script's folder: a link to every entry of the repository
// (so that examples/tools.yaml and deploy/ are where the pages say), bin
// holding the programs make build made, a home of its own, and the ports.
func setup(t *testing.T) func(*testscript.Env) error {
	bin := binaries(t)
	repo := repoRoot(t)
	return func(e *testscript.Env) error {
		entries, err := os.ReadDir(repo)
		if err != nil {
			return err
		}
		for _, en := range entries {
			if notLinked[en.Name()] {
				continue
			}
			if err := os.Symlink(filepath.Join(repo, en.Name()), filepath.Join(e.WorkDir, en.Name())); err != nil {
				return err
			}
		}
		if err := os.Symlink(bin, filepath.Join(e.WorkDir, "bin")); err != nil {
			return err
		}
		home := filepath.Join(e.WorkDir, ".home")
		if err := os.Mkdir(home, 0o700); err != nil {
			return err
		}
		e.Setenv("HOME", home)
		e.Setenv("REPO", repo)
		e.Setenv("PATH", standIns()+string(os.PathListSeparator)+e.Getenv("PATH"))
		// The go command, for make and go run: the caches of the test's own.
		for _, v := range []string{"GOENV", "GOCACHE", "GOPATH", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN", "CI"} {
			if val, ok := os.LookupEnv(v); ok {
				e.Setenv(v, val)
			}
		}
		s := &script{t: t, ports: map[string]string{}, bg: map[string]*bgProc{}}
		for _, p := range docPorts {
			free, err := freePort()
			if err != nil {
				return err
			}
			s.ports[p] = free
			e.Setenv("PORT_"+p, free)
		}
		s.env = append([]string(nil), e.Vars...)
		e.Values[scriptKey{}] = s
		e.Defer(func() {
			for _, p := range s.bg {
				select {
				case <-p.done:
				default:
					_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
					<-p.done
				}
			}
		})
		return nil
	}
}

// substitute returns the command text with the script's free ports in place
// of the pages' ones, after the replacements the script asked for.
func (s *script) substitute(text string, subs [][2]string) string {
	for _, r := range subs {
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	for {
		next := portPattern.ReplaceAllStringFunc(text, func(m string) string {
			p := portPattern.FindStringSubmatch(m)
			return p[1] + s.ports[p[2]] + p[3]
		})
		if next == text {
			return text
		}
		text = next // overlapping matches (":4222,4222") take a second pass
	}
}

var programPattern = regexp.MustCompile(`(^|[\s;&|(=$])bin/(executor|emitter)\b`)

// wrap returns the bash program that runs a command of a page the way a
// terminal would: after the variables earlier commands of the script set
// (kept in $WORK/.session), with its default NATS port moved to the script's
// own. An executor that embeds its server listens on TOOLEXEC_NATS_PORT
// (NATS_URL would make it connect instead); an emitter connects to NATS_URL.
// With save, the variables are kept for the next command.
func (s *script) wrap(text string, save bool) string {
	var b strings.Builder
	b.WriteString("set -a\n[ -f \"$WORK/.session\" ] && . \"$WORK/.session\"\n")
	for _, m := range programPattern.FindAllStringSubmatch(text, -1) {
		switch m[2] {
		case "executor":
			fmt.Fprintf(&b, "unset NATS_URL\nTOOLEXEC_NATS_PORT=%s\n", s.ports["4222"])
		case "emitter":
			fmt.Fprintf(&b, "NATS_URL=nats://127.0.0.1:%s\n", s.ports["4222"])
		}
	}
	b.WriteString(text)
	b.WriteString("\n")
	if save {
		b.WriteString("status=$?\nexport -p | grep -Ev '^declare -x (PWD|OLDPWD|SHLVL|_)=' >\"$WORK/.session\"\nexit $status\n")
	}
	return b.String()
}

// parseRunArgs reads [-exit N] [-sub OLD NEW]... N.
func parseRunArgs(ts *testscript.TestScript, args []string) (n int, exit int, subs [][2]string) {
	for len(args) > 1 {
		switch args[0] {
		case "-exit":
			v, err := strconv.Atoi(args[1])
			ts.Check(err)
			exit, args = v, args[2:]
		case "-sub":
			if len(args) < 4 {
				ts.Fatalf("-sub takes two words, OLD and NEW")
			}
			subs, args = append(subs, [2]string{args[1], args[2]}), args[3:]
		default:
			ts.Fatalf("unknown option %q", args[0])
		}
	}
	if len(args) != 1 {
		ts.Fatalf("want the number of a command of the block")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	return n, exit, subs
}

// cmdText returns command n of the script's block, after checking that
// every replacement the script asked for applies.
func (s *script) cmdText(ts *testscript.TestScript, n int, subs [][2]string) command {
	if s.cur == nil {
		ts.Fatalf("no block: name one with `block ID` first")
	}
	cmds := s.cur.commands()
	if n < 1 || n > len(cmds) {
		ts.Fatalf("%s has %d commands, not %d", s.cur.ID, len(cmds), n)
	}
	c := cmds[n-1]
	for _, r := range subs {
		if !strings.Contains(c.Text, r[0]) {
			ts.Fatalf("command %d of %s has no %q to replace:\n%s", n, s.cur.ID, r[0], c.Text)
		}
	}
	return c
}

// commands are the script commands of this package.
//
//	block ID                  the block the following commands refer to; the
//	                          script must run (or dry-run, or say why not) each
//	                          of its commands
//	use ID                    the same, for a block whose commands the script
//	                          borrows to set up what it checks
//	run [-exit N] [-sub OLD NEW]... N
//	                          run its command N in the foreground, as written but
//	                          for the ports and the replacements (placeholders such
//	                          as <key>, host names); its output is stdout/stderr;
//	                          it must exit N (0 by default; ! run: non-zero)
//	bg NAME [-sub OLD NEW]... N
//	                          start command N in the background, its output going
//	                          to NAME.stdout and NAME.stderr
//	bgshell NAME TEXT         start TEXT (not a command of a page) the same way
//	await FILE REGEXP         wait (up to a minute) until FILE matches REGEXP
//	term NAME                 SIGTERM to a background command; it must exit 0
//	                          (! term: non-zero) within 30 s
//	dryrun N                  command N is `make TARGET`: run make -n TARGET
//	built N                   command N is `make build`, which the harness ran
//	notrun N REASON           command N is not run, for REASON
//	capture FILE REGEXP VAR   set VAR to REGEXP's group in FILE (or stdout, stderr)
//	shell TEXT                run TEXT (what a page says in prose) like a command
//	                          of a block: after the variables they set
//	mcpstdio CONFIG OUT       start the MCP server an mcpServers CONFIG names, as an
//	                          agent would, and write what it lists and answers to OUT
//	writeblock [-sub OLD NEW]... ID FILE
//	                          write block ID, ports replaced, to FILE
//	matchblock [-norm REGEXP]... ID FILE
//	                          block ID and FILE agree, after replacing what each
//	                          REGEXP matches in both by "…"
func commands() map[string]func(*testscript.TestScript, bool, []string) {
	cmds := map[string]func(*testscript.TestScript, bool, []string){
		"block": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: block ID")
			}
			b := findBlock(ts, args[0])
			state(ts).cur = &b
		},
		// use is block for a script that borrows commands of a block to set
		// up what it checks (an executor to call): it need not run them all.
		"use": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: use ID")
			}
			b := findBlock(ts, args[0])
			state(ts).cur = &b
		},
		"run": func(ts *testscript.TestScript, neg bool, args []string) {
			s := state(ts)
			n, exit, subs := parseRunArgs(ts, args)
			c := s.cmdText(ts, n, subs)
			text := s.substitute(c.Text, subs)
			ts.Logf("$ %s", text)
			err := ts.Exec("setsid", "-w", "bash", "-c", s.wrap(text, true))
			checkExit(ts, neg, exit, err)
		},
		"bg": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) < 2 {
				ts.Fatalf("usage: bg NAME [-sub OLD NEW]... N")
			}
			s := state(ts)
			n, _, subs := parseRunArgs(ts, args[1:])
			startBG(ts, args[0], s.substitute(s.cmdText(ts, n, subs).Text, subs))
		},
		"bgshell": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 {
				ts.Fatalf("usage: bgshell NAME TEXT")
			}
			startBG(ts, args[0], args[1])
		},
		"await": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 {
				ts.Fatalf("usage: await FILE REGEXP")
			}
			re, err := regexp.Compile("(?m)" + args[1])
			ts.Check(err)
			deadline := time.Now().Add(time.Minute)
			for {
				b, _ := os.ReadFile(ts.MkAbs(args[0]))
				if re.Match(b) {
					return
				}
				for name, p := range state(ts).bg {
					select {
					case <-p.done:
						if strings.HasPrefix(args[0], name+".") {
							ts.Fatalf("%s exited (%v) before %s matched %q:\n%s\n%s", name, p.err, args[0], args[1],
								ts.ReadFile(name+".stdout"), ts.ReadFile(name+".stderr"))
						}
					default:
					}
				}
				if time.Now().After(deadline) {
					ts.Fatalf("%s did not match %q within a minute:\n%s", args[0], args[1], b)
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
		"term": func(ts *testscript.TestScript, neg bool, args []string) {
			if len(args) != 1 {
				ts.Fatalf("usage: term NAME")
			}
			p, ok := state(ts).bg[args[0]]
			if !ok {
				ts.Fatalf("no background command %s", args[0])
			}
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
				ts.Fatalf("%s did not exit within 30 s of SIGTERM", args[0])
			}
			ts.Logf("%s: %v", args[0], p.err)
			checkExit(ts, neg, 0, p.err)
		},
		"dryrun": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: dryrun N")
			}
			n, _, _ := parseRunArgs(ts, args)
			c := state(ts).cmdText(ts, n, nil)
			target, ok := makeTarget(c.Text)
			if !ok {
				ts.Fatalf("command %d is not make TARGET: %s", n, c.Text)
			}
			ts.Check(ts.Exec("make", "-n", target))
		},
		"built": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: built N")
			}
			n, _, _ := parseRunArgs(ts, args)
			if target, ok := makeTarget(state(ts).cmdText(ts, n, nil).Text); !ok || target != "build" {
				ts.Fatalf("command %d is not make build", n)
			}
			// binaries ran it before any script started; bin/ holds its programs.
		},
		"shell": func(ts *testscript.TestScript, neg bool, args []string) {
			if len(args) != 1 {
				ts.Fatalf("usage: shell TEXT")
			}
			s := state(ts)
			ts.Logf("$ %s", args[0])
			err := ts.Exec("setsid", "-w", "bash", "-c", s.wrap(args[0], true))
			checkExit(ts, neg, 0, err)
		},
		"mcpstdio": cmdMCPStdio,
		"capture": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 3 {
				ts.Fatalf("usage: capture FILE REGEXP VAR")
			}
			re, err := regexp.Compile("(?m)" + args[1])
			ts.Check(err)
			m := re.FindStringSubmatch(ts.ReadFile(args[0]))
			if len(m) != 2 {
				ts.Fatalf("%s does not match %q (with one group)", args[0], args[1])
			}
			setenv(ts, args[2], m[1])
		},
		"notrun": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 || strings.TrimSpace(args[1]) == "" {
				ts.Fatalf("usage: notrun N REASON")
			}
			n, _, _ := parseRunArgs(ts, args[:1])
			state(ts).cmdText(ts, n, nil)
			ts.Logf("command %d of %s is not run: %s", n, state(ts).cur.ID, args[1])
		},
		"writeblock": func(ts *testscript.TestScript, neg bool, args []string) {
			var subs [][2]string
			for len(args) > 2 && args[0] == "-sub" && len(args) >= 5 {
				subs, args = append(subs, [2]string{args[1], args[2]}), args[3:]
			}
			if neg || len(args) != 2 {
				ts.Fatalf("usage: writeblock [-sub OLD NEW]... ID FILE")
			}
			b := findBlock(ts, args[0])
			for _, r := range subs {
				if !strings.Contains(b.Text, r[0]) {
					ts.Fatalf("%s has no %q to replace", b.ID, r[0])
				}
			}
			ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(state(ts).substitute(b.Text, subs)), 0o600))
		},
		"matchblock": func(ts *testscript.TestScript, neg bool, args []string) {
			var norms []*regexp.Regexp
			for len(args) > 2 && args[0] == "-norm" {
				re, err := regexp.Compile(args[1])
				ts.Check(err)
				norms, args = append(norms, re), args[2:]
			}
			if len(args) != 2 {
				ts.Fatalf("usage: matchblock [-norm REGEXP]... ID FILE")
			}
			b := findBlock(ts, args[0])
			norm := func(s string) string {
				for _, re := range norms {
					s = re.ReplaceAllString(s, "…")
				}
				return strings.TrimSpace(s)
			}
			want, got := norm(b.Text), norm(ts.ReadFile(args[1]))
			if (want == got) == neg {
				ts.Fatalf("%s and %s differ (normalised):\n--- the page\n%s\n--- %s\n%s", b.ID, args[1], want, args[1], got)
			}
		},
	}
	for _, more := range []map[string]func(*testscript.TestScript, bool, []string){servicesCommands, clusterCommands, nscCommands} {
		for name, f := range more {
			cmds[name] = f
		}
	}
	return cmds
}

// startBG starts text like a command of a block, in the background, its
// output going to NAME.stdout and NAME.stderr.
func startBG(ts *testscript.TestScript, name, text string) {
	s := state(ts)
	if _, ok := s.bg[name]; ok {
		ts.Fatalf("a background command %s already ran", name)
	}
	ts.Logf("$ %s &", text)
	cmd := exec.Command("bash", "-c", s.wrap(text, false))
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := os.Create(ts.MkAbs(name + ".stdout"))
	ts.Check(err)
	errOut, err := os.Create(ts.MkAbs(name + ".stderr"))
	ts.Check(err)
	cmd.Stdout, cmd.Stderr = out, errOut
	ts.Check(cmd.Start())
	p := &bgProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		errOut.Close()
		close(p.done)
	}()
	s.bg[name] = p
}

// makeTarget returns TARGET of a command `make TARGET  # comment`.
func makeTarget(text string) (string, bool) {
	text, _, _ = strings.Cut(text, "#")
	f := strings.Fields(text)
	if len(f) != 2 || f[0] != "make" {
		return "", false
	}
	return f[1], true
}

// checkExit fails the script unless err is the exit status wanted: want (or,
// negated, anything but 0).
func checkExit(ts *testscript.TestScript, neg bool, want int, err error) {
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%v", err)
		}
		got = ee.ExitCode()
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			ts.Fatalf("killed by %v", st.Signal())
		}
	}
	switch {
	case neg && got == 0:
		ts.Fatalf("exit status 0, want a failure")
	case !neg && got != want:
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

var (
	blocksOnce sync.Once
	blocksByID map[string]block
	blocksErr  error
)

// findBlock returns the block named id, for a script.
func findBlock(ts *testscript.TestScript, id string) block {
	blocksOnce.Do(func() {
		var bs []block
		bs, blocksErr = readBlocks()
		blocksByID = map[string]block{}
		for _, b := range bs {
			blocksByID[b.ID] = b
		}
	})
	ts.Check(blocksErr)
	b, ok := blocksByID[id]
	if !ok {
		ts.Fatalf("no block %s in the pages", id)
	}
	return b
}

// scriptUse is what a script does with the blocks it names: for each block,
// the commands it runs (or dry-runs), found by reading the script.
type scriptUse struct {
	file   string
	blocks map[string]map[int]string // block ID -> command -> "run", or "not run: <reason>"
	used   map[string]int            // blocks named by use
}

var (
	usePattern   = regexp.MustCompile(`^\s*(?:!\s*)?(block|use|run|bg|dryrun|built|notrun|writeblock|matchblock)\b(.*)$`)
	numberAtEnd  = regexp.MustCompile(`\s(\d+)\s*(?:#.*)?$`)
	blockIDInArg = regexp.MustCompile(`((?:README\.md|docs/[^#\s']+\.md|deploy/README\.md)#[^\s']+:\d+)`)
)

// readScripts reads every script under testdata for the blocks it names.
func readScripts(t testing.TB) []scriptUse {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []scriptUse
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := scriptUse{file: f, blocks: map[string]map[int]string{}, used: map[string]int{}}
		cur := ""
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "-- ") {
				break // the archive's files
			}
			m := usePattern.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			switch m[1] {
			case "use":
				cur = "" // borrowed: its commands are not counted
				if id := strings.Trim(strings.TrimSpace(m[2]), "'"); u.used[id] == 0 {
					u.used[id]++
				}
			case "block":
				cur = strings.Trim(strings.TrimSpace(m[2]), "'")
				if u.blocks[cur] == nil {
					u.blocks[cur] = map[int]string{}
				}
			case "writeblock", "matchblock":
				if id := blockIDInArg.FindString(m[2]); id != "" && u.blocks[id] == nil {
					u.blocks[id] = map[int]string{}
				}
			case "notrun":
				if f := strings.SplitN(strings.TrimSpace(m[2]), " ", 2); len(f) == 2 && cur != "" {
					i, _ := strconv.Atoi(f[0])
					u.blocks[cur][i] = "not run: " + strings.Trim(strings.TrimSpace(f[1]), "'")
				}
			default:
				if n := numberAtEnd.FindStringSubmatch(m[2]); n != nil && cur != "" {
					i, _ := strconv.Atoi(n[1])
					if u.blocks[cur][i] == "" {
						u.blocks[cur][i] = m[1]
					}
				}
			}
		}
		out = append(out, u)
	}
	return out
}
