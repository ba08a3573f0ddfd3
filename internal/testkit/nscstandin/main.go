// Command nscstandin is what tests/docs runs as nsc: nsc itself is not on the
// Go module proxy the tests may use, and deploy/README.md's sketch of the
// operator layout is to be run all the same. It does what each subcommand the
// sketch uses does to the operator's and the accounts' JWTs (with nats-io/jwt,
// which nsc uses too), with the flags the sketch gives, and refuses anything
// else, including what JWT validation refuses. Its store is
// $HOME/nsc-stand-in.json. What it cannot check is nsc's own spelling of the
// flags.
//
//	add operator --name N [--sys]
//	edit operator [--sk generate] [--account-jwt-server-url URL]
//	add account --name N
//	edit account --name N [--sk generate] [--js-disk-storage B] [--js-mem-storage B]
//	add export --account A [--service] --subject S [--account-token-position N] [--private]
//	add import --account A --token FILE
//	add import --account A [--service] --src-account KEY --remote-subject S
//	add user --account A --name U
//	describe account A --field sub
//	generate activation --account A --target-account KEY --subject S -o FILE
//	generate creds --account A --name U
//	generate config --nats-resolver --sys-account A
//	push --all
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/pflag"
)

func main() {
	if err := runNSC(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "nsc (the tests' stand-in):", err)
		os.Exit(1)
	}
}

// nscStore is the stand-in's state: seeds, and the JWTs made so far.
type nscStore struct {
	Operator struct {
		Name, Seed, JWT string
		SigningSeeds    []string
	}
	Accounts map[string]*nscAccount // by name
}

type nscAccount struct {
	Seed, JWT    string
	SigningSeeds []string
	Users        map[string]nscUser
}

type nscUser struct{ Seed, JWT string }

func nscStorePath() string { return filepath.Join(os.Getenv("HOME"), "nsc-stand-in.json") }

func loadNSC() (*nscStore, error) {
	st := &nscStore{Accounts: map[string]*nscAccount{}}
	b, err := os.ReadFile(nscStorePath())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	return st, json.Unmarshal(b, st)
}

func (st *nscStore) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(nscStorePath(), b, 0o600)
}

func (st *nscStore) operatorKey() (nkeys.KeyPair, error) {
	if st.Operator.Seed == "" {
		return nil, errors.New("no operator: add operator first")
	}
	return nkeys.FromSeed([]byte(st.Operator.Seed))
}

func (st *nscStore) account(name string) (*nscAccount, *jwt.AccountClaims, error) {
	a, ok := st.Accounts[name]
	if !ok {
		return nil, nil, fmt.Errorf("no account %q", name)
	}
	c, err := jwt.DecodeAccountClaims(a.JWT)
	return a, c, err
}

// accountByKey finds the account whose public key is pub.
func (st *nscStore) accountByKey(pub string) (*nscAccount, *jwt.AccountClaims, error) {
	for name, a := range st.Accounts {
		c, err := jwt.DecodeAccountClaims(a.JWT)
		if err != nil {
			return nil, nil, err
		}
		if c.Subject == pub {
			return st.Accounts[name], c, nil
		}
	}
	return nil, nil, fmt.Errorf("no account with key %s", pub)
}

// sign encodes an account's claims with the operator's identity key.
func (st *nscStore) sign(a *nscAccount, c *jwt.AccountClaims) error {
	op, err := st.operatorKey()
	if err != nil {
		return err
	}
	a.JWT, err = c.Encode(op)
	return err
}

func newAccount(st *nscStore, name string) (*nscAccount, error) {
	if _, ok := st.Accounts[name]; ok {
		return nil, fmt.Errorf("account %q exists", name)
	}
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	c := jwt.NewAccountClaims(pub)
	c.Name = name
	a := &nscAccount{Seed: string(seed), Users: map[string]nscUser{}}
	if err := st.sign(a, c); err != nil {
		return nil, err
	}
	st.Accounts[name] = a
	return a, nil
}

// addUser makes a user of account a, signed with the account's newest
// signing key when it has one (the user JWT then names its account).
func addUser(a *nscAccount, name string) error {
	if _, ok := a.Users[name]; ok {
		return fmt.Errorf("user %q exists", name)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	signer, err := nkeys.FromSeed([]byte(a.Seed))
	if err != nil {
		return err
	}
	if n := len(a.SigningSeeds); n > 0 {
		acct, _ := signer.PublicKey()
		uc.IssuerAccount = acct
		if signer, err = nkeys.FromSeed([]byte(a.SigningSeeds[n-1])); err != nil {
			return err
		}
	}
	token, err := uc.Encode(signer)
	if err != nil {
		return err
	}
	a.Users[name] = nscUser{Seed: string(seed), JWT: token}
	return nil
}

func runNSC(args []string) error {
	if len(args) < 1 {
		return errors.New("no command")
	}
	verb, rest := args[0], args[1:]
	noun := ""
	if verb != "push" {
		if len(rest) < 1 {
			return fmt.Errorf("%s what?", verb)
		}
		noun, rest = rest[0], rest[1:]
	}
	fs := pflag.NewFlagSet("nsc "+verb+" "+noun, pflag.ContinueOnError)
	var (
		name, account, subject, sk, serverURL, srcAccount, remote, token, target, out, field, sysAccount string
		service, private, sys, all, natsResolver                                                         bool
		tokenPos                                                                                         uint
		disk, mem                                                                                        string
	)
	st, err := loadNSC()
	if err != nil {
		return err
	}
	switch verb + " " + noun {
	case "add operator":
		fs.StringVar(&name, "name", "", "")
		fs.BoolVar(&sys, "sys", false, "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if st.Operator.Seed != "" {
			return errors.New("an operator exists")
		}
		kp, err := nkeys.CreateOperator()
		if err != nil {
			return err
		}
		seed, _ := kp.Seed()
		st.Operator.Name, st.Operator.Seed = name, string(seed)
		pub, _ := kp.PublicKey()
		oc := jwt.NewOperatorClaims(pub)
		oc.Name = name
		if sys {
			a, err := newAccount(st, "SYS")
			if err != nil {
				return err
			}
			c, _ := jwt.DecodeAccountClaims(a.JWT)
			oc.SystemAccount = c.Subject
			if err := addUser(a, "sys"); err != nil {
				return err
			}
		}
		if st.Operator.JWT, err = oc.Encode(kp); err != nil {
			return err
		}
	case "edit operator":
		fs.StringVar(&sk, "sk", "", "")
		fs.StringVar(&serverURL, "account-jwt-server-url", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		kp, err := st.operatorKey()
		if err != nil {
			return err
		}
		oc, err := jwt.DecodeOperatorClaims(st.Operator.JWT)
		if err != nil {
			return err
		}
		if sk != "" {
			if sk != "generate" {
				return errors.New("--sk: only generate")
			}
			skp, _ := nkeys.CreateOperator()
			seed, _ := skp.Seed()
			pub, _ := skp.PublicKey()
			st.Operator.SigningSeeds = append(st.Operator.SigningSeeds, string(seed))
			oc.SigningKeys.Add(pub)
		}
		if serverURL != "" {
			oc.AccountServerURL = serverURL
		}
		if st.Operator.JWT, err = oc.Encode(kp); err != nil {
			return err
		}
	case "add account":
		fs.StringVar(&name, "name", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if _, err := newAccount(st, name); err != nil {
			return err
		}
	case "edit account":
		fs.StringVar(&name, "name", "", "")
		fs.StringVar(&sk, "sk", "", "")
		fs.StringVar(&disk, "js-disk-storage", "", "")
		fs.StringVar(&mem, "js-mem-storage", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		a, c, err := st.account(name)
		if err != nil {
			return err
		}
		if sk != "" {
			if sk != "generate" {
				return errors.New("--sk: only generate")
			}
			skp, _ := nkeys.CreateAccount()
			seed, _ := skp.Seed()
			pub, _ := skp.PublicKey()
			a.SigningSeeds = append(a.SigningSeeds, string(seed))
			c.SigningKeys.Add(pub)
		}
		for _, l := range []struct {
			v   string
			dst *int64
		}{{disk, &c.Limits.JetStreamLimits.DiskStorage}, {mem, &c.Limits.JetStreamLimits.MemoryStorage}} {
			if l.v == "" {
				continue
			}
			n, err := strconv.ParseInt(l.v, 10, 64)
			if err != nil {
				return err
			}
			*l.dst = n
		}
		if err := st.sign(a, c); err != nil {
			return err
		}
	case "add export":
		fs.StringVar(&account, "account", "", "")
		fs.StringVar(&subject, "subject", "", "")
		fs.BoolVar(&service, "service", false, "")
		fs.BoolVar(&private, "private", false, "")
		fs.UintVar(&tokenPos, "account-token-position", 0, "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		a, c, err := st.account(account)
		if err != nil {
			return err
		}
		e := &jwt.Export{Name: subject, Subject: jwt.Subject(subject), Type: jwt.Stream, TokenReq: private, AccountTokenPosition: tokenPos}
		if service {
			e.Type = jwt.Service
		}
		c.Exports.Add(e)
		if err := validated(c); err != nil {
			return err
		}
		if err := st.sign(a, c); err != nil {
			return err
		}
	case "add import":
		fs.StringVar(&account, "account", "", "")
		fs.StringVar(&token, "token", "", "")
		fs.BoolVar(&service, "service", false, "")
		fs.StringVar(&srcAccount, "src-account", "", "")
		fs.StringVar(&remote, "remote-subject", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		a, c, err := st.account(account)
		if err != nil {
			return err
		}
		im := &jwt.Import{Type: jwt.Stream}
		if token != "" {
			b, err := os.ReadFile(token)
			if err != nil {
				return err
			}
			act, err := jwt.DecodeActivationClaims(strings.TrimSpace(string(b)))
			if err != nil {
				return err
			}
			im.Token = strings.TrimSpace(string(b))
			im.Account = act.Issuer
			if act.IssuerAccount != "" {
				im.Account = act.IssuerAccount
			}
			im.Subject = act.ImportSubject
			im.Type = act.ImportType
		} else {
			if service {
				im.Type = jwt.Service
			}
			im.Account, im.Subject = srcAccount, jwt.Subject(remote)
		}
		im.Name = string(im.Subject)
		c.Imports.Add(im)
		if err := validated(c); err != nil {
			return err
		}
		if err := st.sign(a, c); err != nil {
			return err
		}
	case "add user":
		fs.StringVar(&account, "account", "", "")
		fs.StringVar(&name, "name", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		a, _, err := st.account(account)
		if err != nil {
			return err
		}
		if err := addUser(a, name); err != nil {
			return err
		}
	case "describe account":
		fs.StringVar(&field, "field", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() != 1 || field != "sub" {
			return errors.New("usage: describe account NAME --field sub")
		}
		_, c, err := st.account(fs.Arg(0))
		if err != nil {
			return err
		}
		b, _ := json.Marshal(c.Subject) // a JSON value, quotes and all, as nsc prints it
		fmt.Println(string(b))
		return nil
	case "generate activation":
		fs.StringVar(&account, "account", "", "")
		fs.StringVar(&target, "target-account", "", "")
		fs.StringVar(&subject, "subject", "", "")
		fs.StringVarP(&out, "output-file", "o", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		a, c, err := st.account(account)
		if err != nil {
			return err
		}
		var exp *jwt.Export
		for _, e := range c.Exports {
			if string(e.Subject) == subject {
				exp = e
			}
		}
		if exp == nil || !exp.TokenReq {
			return fmt.Errorf("%s exports no private %s", account, subject)
		}
		ac := jwt.NewActivationClaims(target)
		ac.ImportSubject, ac.ImportType = exp.Subject, exp.Type
		ac.Name = subject
		kp, err := nkeys.FromSeed([]byte(a.Seed))
		if err != nil {
			return err
		}
		tok, err := ac.Encode(kp)
		if err != nil {
			return err
		}
		if out == "" {
			fmt.Println(tok)
			return nil
		}
		return os.WriteFile(out, []byte(tok+"\n"), 0o600)
	case "generate creds":
		fs.StringVar(&account, "account", "", "")
		fs.StringVar(&name, "name", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		a, _, err := st.account(account)
		if err != nil {
			return err
		}
		u, ok := a.Users[name]
		if !ok {
			return fmt.Errorf("%s has no user %s", account, name)
		}
		b, err := jwt.FormatUserConfig(u.JWT, []byte(u.Seed))
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	case "generate config":
		fs.BoolVar(&natsResolver, "nats-resolver", false, "")
		fs.StringVar(&sysAccount, "sys-account", "", "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if !natsResolver {
			return errors.New("only --nats-resolver")
		}
		_, c, err := st.account(sysAccount)
		if err != nil {
			return err
		}
		fmt.Printf(
			"operator: %s\nsystem_account: %s\nresolver: {\n  type: full\n  dir: './jwt'\n  allow_delete: false\n  interval: "+
				"\"2m\"\n}\nresolver_preload: {\n  %s: %s\n}\n",
			st.Operator.JWT, c.Subject, c.Subject, st.Accounts[sysAccount].JWT)
		return nil
	case "push ":
		fs.BoolVar(&all, "all", false, "")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if !all {
			return errors.New("only --all")
		}
		return pushAll(st)
	default:
		return fmt.Errorf("the stand-in does not do %q", verb+" "+noun)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return st.save()
}

func validated(c *jwt.AccountClaims) error {
	var vr jwt.ValidationResults
	c.Validate(&vr)
	if errs := vr.Errors(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// pushAll sends every account's JWT to the operator's account server (a
// nats resolver), as the system account's user, and checks each answer.
func pushAll(st *nscStore) error {
	oc, err := jwt.DecodeOperatorClaims(st.Operator.JWT)
	if err != nil {
		return err
	}
	if oc.AccountServerURL == "" {
		return errors.New("the operator has no account server URL")
	}
	var sys *nscAccount
	for _, a := range st.Accounts {
		c, _ := jwt.DecodeAccountClaims(a.JWT)
		if c.Subject == oc.SystemAccount {
			sys = a
		}
	}
	if sys == nil || sys.Users["sys"].JWT == "" {
		return errors.New("no system account user")
	}
	u := sys.Users["sys"]
	nc, err := nats.Connect(oc.AccountServerURL, nats.UserJWTAndSeed(u.JWT, u.Seed), nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	names := make([]string, 0, len(st.Accounts))
	for n := range st.Accounts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		msg, err := nc.RequestWithContext(ctx, "$SYS.REQ.CLAIMS.UPDATE", []byte(st.Accounts[n].JWT))
		cancel()
		if err != nil {
			return fmt.Errorf("pushing %s: %w", n, err)
		}
		var reply struct {
			Data  struct{ Code int } `json:"data"`
			Error *struct {
				Code        int
				Description string
			} `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &reply); err != nil || reply.Error != nil || reply.Data.Code != 200 {
			return fmt.Errorf("pushing %s: %s", n, msg.Data)
		}
		fmt.Printf("[ OK ] pushed %q to the account server\n", n)
	}
	return nil
}
