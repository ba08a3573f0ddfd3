package toolsfile

import (
	"reflect"
	"testing"
)

func TestExpand(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"A": "alpha", "B_2": "beta", "EMPTY": "", "DOLLAR": "${A}"}[k]
		return v, ok
	}
	tests := []struct {
		give      string
		want      string
		wantUnset []string
		wantErr   bool
	}{
		{give: "plain", want: "plain"},
		{give: "${A}", want: "alpha"},
		{give: "x${A}y${B_2}z", want: "xalphaybetaz"},
		{give: "${EMPTY}", want: ""},
		{give: "${DOLLAR}", want: "${A}"}, // expanded once, never again
		{give: "$$", want: "$"},
		{give: "$${A}", want: "${A}"},
		{give: "$A and $", want: "$A and $"},
		{give: "cost: $5", want: "cost: $5"},
		{give: "${NOPE}/${A}/${NOPE}/${NOPE2}", want: "/alpha//", wantUnset: []string{"NOPE", "NOPE2"}},
		{give: "${", wantErr: true},
		{give: "${A", wantErr: true},
		{give: "${}", wantErr: true},
		{give: "${1A}", wantErr: true},
		{give: "${A-B}", wantErr: true},
		{give: "${ A }", wantErr: true},
	}
	for _, tt := range tests {
		got, unset, err := expand(tt.give, env)
		if (err != nil) != tt.wantErr {
			t.Errorf("expand(%q) err = %v; want error: %v", tt.give, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if got != tt.want || !reflect.DeepEqual(unset, tt.wantUnset) {
			t.Errorf("expand(%q) = %q, unset %q; want %q, unset %q", tt.give, got, unset, tt.want, tt.wantUnset)
		}
	}
}
