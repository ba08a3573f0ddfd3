// Package demo is the airline of the toolexec documentation, in memory: the tools
// `executor --demo` serves, and an HTTP face for examples/tools.yaml.
//
// [Airline.Tools] returns three typed tools, one of each kind:
//
//	lookup_fare     ReadOnly     {flight}                         → the fare, e.g. "GBP 612.40"
//	book            Effectful    {flight, seats, request_id,      → a PNR, e.g. "K7Q2ZD"
//	                              fail_after_effect?}
//	                             key_arguments [flight], check_arguments [seats]
//	update_profile  Idempotent   {passenger, seat, email?}        → a confirmation
//	                             key_arguments [passenger], check_arguments [seat, email]
//
// book's request_id is fresh on every attempt, which is why it is not a key
// argument; seats is a check argument, so a duplicate asking for other seats is
// refused instead of being answered with another call's PNR.
//
// update_profile is keyed by the passenger alone, with the values as check
// arguments. Keying it by the values too would be wrong: within one run, setting
// window, then aisle, then window again would answer the third call from the
// first one's record and leave the passenger on the aisle. As declared, the
// second call is refused as a mismatch, which is honest.
//
// The airline does not deduplicate anything itself, so that what toolexec
// prevents stays visible: [Airline.Bookings] counts every booking that landed.
//
// # Provoking an indeterminate outcome
//
// book with "fail_after_effect": true takes the booking and then fails as a
// downstream timeout would: the seat is taken, the answer is lost. The dispatcher
// marks the key indeterminate, and a retry of the same call is answered
// indeterminate again instead of booking a second seat. [Airline.Cancel] makes
// book refuse a flight before acting, an error wrapped with [tool.NoEffect].
package demo
