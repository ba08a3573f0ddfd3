package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
)

// maxRequestBytes bounds a request body the handler reads.
const maxRequestBytes = 64 << 10

// flightPattern is the flight number the tools' schemas accept.
var flightPattern = regexp.MustCompile(`^[A-Z0-9]{2}[0-9]{1,4}$`)

// Handler serves the airline over HTTP, as examples/tools.yaml expects it:
//
//	POST /fares      FareArgs     200 and the fare
//	POST /bookings   BookArgs     201 and the PNR; 409 for a cancelled flight (before
//	                              acting); with fail_after_effect the booking lands
//	                              and the connection is closed without an answer
//	PUT  /profiles   ProfileArgs  200 and the confirmation
//
// A body that is not a JSON object of the right shape, or has unknown members,
// is answered 400; arguments out of range 422; another method 405. Like the rest
// of the airline it ignores Idempotency-Key, so that duplicates which get past
// toolexec are visible.
func (a *Airline) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fares", func(w http.ResponseWriter, r *http.Request) {
		var args FareArgs
		if !decode(w, r, &args) {
			return
		}
		if !flightPattern.MatchString(args.Flight) {
			http.Error(w, "flight must look like BA117", http.StatusUnprocessableEntity)
			return
		}
		io.WriteString(w, Fare(args.Flight))
	})
	mux.HandleFunc("POST /bookings", func(w http.ResponseWriter, r *http.Request) {
		var args BookArgs
		if !decode(w, r, &args) {
			return
		}
		switch {
		case !flightPattern.MatchString(args.Flight):
			http.Error(w, "flight must look like BA117", http.StatusUnprocessableEntity)
			return
		case args.Seats < 1 || args.Seats > 9:
			http.Error(w, "seats must be 1 to 9", http.StatusUnprocessableEntity)
			return
		case args.RequestID == "":
			http.Error(w, "request_id is required", http.StatusUnprocessableEntity)
			return
		}
		ref, err := a.Book(args)
		if errors.Is(err, ErrFlightCancelled) {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		if args.FailAfterEffect {
			// The seat is taken; the answer never leaves.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
				return
			}
			http.Error(w, "answer lost", http.StatusGatewayTimeout)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, ref)
	})
	mux.HandleFunc("PUT /profiles", func(w http.ResponseWriter, r *http.Request) {
		var args ProfileArgs
		if !decode(w, r, &args) {
			return
		}
		switch {
		case args.Passenger == "":
			http.Error(w, "passenger is required", http.StatusUnprocessableEntity)
			return
		case args.Seat != "window" && args.Seat != "aisle" && args.Seat != "middle":
			http.Error(w, "seat must be window, aisle or middle", http.StatusUnprocessableEntity)
			return
		}
		io.WriteString(w, a.UpdateProfile(args))
	})
	return mux
}

// decode reads the request body into v, strictly; it answers 400 and returns
// false when it cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		http.Error(w, fmt.Sprintf("bad request body: %v", err), http.StatusBadRequest)
		return false
	}
	if dec.More() {
		http.Error(w, "bad request body: more than one JSON value", http.StatusBadRequest)
		return false
	}
	return true
}
