package demo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/tesserix/toolexec/tool"
)

// Errors the airline's tools return.
var (
	// ErrAnswerLost is returned by book with fail_after_effect: the booking was
	// taken, the answer did not come back.
	ErrAnswerLost = errors.New("demo: the airline took the booking but its answer was lost")
	// ErrFlightCancelled is returned, wrapped with tool.NoEffect, when booking a
	// cancelled flight.
	ErrFlightCancelled = errors.New("demo: flight cancelled")
)

// FareArgs are lookup_fare's arguments.
type FareArgs struct {
	Flight string `json:"flight" jsonschema:"pattern=^[A-Z0-9]{2}[0-9]{1\\,4}$" jsonschema_description:"Flight number, e.g. BA117."`
}

// BookArgs are book's arguments.
type BookArgs struct {
	Flight    string `json:"flight" jsonschema:"pattern=^[A-Z0-9]{2}[0-9]{1\\,4}$" jsonschema_description:"Flight number, e.g. BA117."`
	Seats     int    `json:"seats" jsonschema:"minimum=1,maximum=9" jsonschema_description:"How many seats."`
	RequestID string `json:"request_id" jsonschema:"minLength=1,maxLength=128" jsonschema_description:"Fresh on every attempt, which is why it is not a key argument."`
	// FailAfterEffect makes the booking land and then fail as a timeout would.
	FailAfterEffect bool `json:"fail_after_effect,omitempty" jsonschema_description:"Demo only: take the booking, then lose the answer."`
}

// ProfileArgs are update_profile's arguments.
type ProfileArgs struct {
	Passenger string `json:"passenger" jsonschema:"minLength=1,maxLength=128" jsonschema_description:"Who the profile belongs to."`
	Seat      string `json:"seat" jsonschema:"enum=window,enum=aisle,enum=middle" jsonschema_description:"Seat preference."`
	Email     string `json:"email,omitempty" jsonschema:"maxLength=254" jsonschema_description:"Contact email."`
}

// Booking is one booking that landed.
type Booking struct {
	PNR       string
	Flight    string
	Seats     int
	RequestID string
}

// Profile is a passenger's stored profile.
type Profile struct {
	Seat  string
	Email string
}

// Airline is an in-memory airline. Its zero value is an airline with no bookings,
// ready to use; it is safe for concurrent use.
type Airline struct {
	mu        sync.Mutex           // protects the fields below
	bookings  map[string][]Booking // by flight, in the order they landed
	cancelled map[string]bool      // flights book refuses
	profiles  map[string]Profile   // by passenger
	writes    map[string]int       // profile writes, by passenger
	seq       uint32               // bookings taken, for PNRs

	once  sync.Once
	tools []*tool.Tool
}

// New returns an empty airline.
func New() *Airline { return &Airline{} }

// Tools returns the airline's tools: lookup_fare, book and update_profile, bound
// to a. Every call returns the same tools.
func (a *Airline) Tools() []*tool.Tool {
	a.once.Do(func() {
		a.tools = []*tool.Tool{
			must(tool.Typed(tool.Spec{
				Name:        "lookup_fare",
				Description: "Read the current fare of a flight.",
				Idempotency: &tool.Policy{Kind: tool.ReadOnly},
				Timeout:     2 * time.Second,
				Retry:       tool.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
			}, a.lookupFare)),
			must(tool.Typed(tool.Spec{
				Name:        "book",
				Description: "Take seats on a flight. Never repeated; a lost answer is reported as indeterminate.",
				Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"seats"}},
				Timeout:     10 * time.Second,
			}, a.book)),
			must(tool.Typed(tool.Spec{
				Name:        "update_profile",
				Description: "Set a passenger's seat preference and contact email.",
				Idempotency: &tool.Policy{Kind: tool.Idempotent, KeyArguments: []string{"passenger"}, CheckArguments: []string{"seat", "email"}},
				Timeout:     5 * time.Second,
				Retry:       tool.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
			}, a.updateProfile)),
		}
	})
	return a.tools
}

// must panics on a declaration error: the declarations above are fixed, and the
// tests build them.
func must(t *tool.Tool, err error) *tool.Tool {
	if err != nil {
		panic(fmt.Sprintf("demo: %v", err))
	}
	return t
}

// Bookings returns how many bookings landed on flight: duplicates that got
// through would show here.
func (a *Airline) Bookings(flight string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.bookings[flight])
}

// BookingsOf returns the bookings that landed on flight, oldest first.
func (a *Airline) BookingsOf(flight string) []Booking {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Booking(nil), a.bookings[flight]...)
}

// Cancel makes book refuse flight, before acting (no effect).
func (a *Airline) Cancel(flight string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelled == nil {
		a.cancelled = map[string]bool{}
	}
	a.cancelled[flight] = true
}

// Profile returns the passenger's profile, if one was written.
func (a *Airline) Profile(passenger string) (Profile, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.profiles[passenger]
	return p, ok
}

// ProfileWrites returns how many times the passenger's profile was written.
func (a *Airline) ProfileWrites(passenger string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writes[passenger]
}

// Fare returns flight's fare: a few flights have fixed fares, the others one
// derived from the flight number, so that every flight has the same fare every
// time.
func Fare(flight string) string {
	switch flight {
	case "BA117":
		return "GBP 612.40"
	case "LH400":
		return "EUR 489.00"
	case "UA901":
		return "USD 734.20"
	}
	h := fnv.New32a()
	h.Write([]byte(flight))
	n := h.Sum32()
	return fmt.Sprintf("EUR %d.%02d", 90+n%900, n/900%100)
}

func (a *Airline) lookupFare(ctx context.Context, _ tool.Context, args FareArgs) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return Fare(args.Flight), nil
}

// Book takes a booking, as the book tool does (without fail_after_effect). It
// returns the PNR, or an error matching ErrFlightCancelled.
func (a *Airline) Book(args BookArgs) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelled[args.Flight] {
		return "", fmt.Errorf("%w: %s", ErrFlightCancelled, args.Flight)
	}
	if a.bookings == nil {
		a.bookings = map[string][]Booking{}
	}
	a.seq++
	b := Booking{PNR: pnr(a.seq), Flight: args.Flight, Seats: args.Seats, RequestID: args.RequestID}
	a.bookings[args.Flight] = append(a.bookings[args.Flight], b)
	return b.PNR, nil
}

func (a *Airline) book(ctx context.Context, _ tool.Context, args BookArgs) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", tool.NoEffect(err) // nothing done yet
	}
	ref, err := a.Book(args)
	if err != nil {
		return "", tool.NoEffect(err)
	}
	if args.FailAfterEffect {
		return "", fmt.Errorf("book %s: %w (simulated timeout)", args.Flight, ErrAnswerLost)
	}
	return ref, nil
}

// UpdateProfile writes the passenger's profile, as update_profile does, and
// returns the confirmation.
func (a *Airline) UpdateProfile(args ProfileArgs) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.profiles == nil {
		a.profiles, a.writes = map[string]Profile{}, map[string]int{}
	}
	a.profiles[args.Passenger] = Profile{Seat: args.Seat, Email: args.Email}
	a.writes[args.Passenger]++
	return fmt.Sprintf("profile of %s: %s seat", args.Passenger, args.Seat)
}

func (a *Airline) updateProfile(ctx context.Context, _ tool.Context, args ProfileArgs) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", tool.NoEffect(err)
	}
	return a.UpdateProfile(args), nil
}

// pnrAlphabet leaves out letters and digits that are easily confused (I, O, 0, 1).
const pnrAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// pnr spells the n-th booking as six characters. Multiplying by an odd number
// modulo 2^30 is a bijection, so distinct bookings get distinct PNRs that do
// not look sequential.
func pnr(n uint32) string {
	v := (n*0x2545F491 + 0x1234567) & (1<<30 - 1)
	var b [6]byte
	for i := range b {
		b[len(b)-1-i] = pnrAlphabet[v&31]
		v >>= 5
	}
	return string(b[:])
}
