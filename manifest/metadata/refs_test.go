package metadata

import (
	"encoding/json"
	"testing"
)

// TestKindText: a kind is written as its name and read back from it.
func TestKindText(t *testing.T) {
	for k := kindUnknown; k < numKinds; k++ {
		b, err := json.Marshal(struct{ Kind Kind }{k})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"Kind":"` + k.String() + `"}`; string(b) != want {
			t.Errorf("%d: %s, want %s", k, b, want)
		}
		var back struct{ Kind Kind }
		if err := json.Unmarshal(b, &back); err != nil || back.Kind != k {
			t.Errorf("%s: read back %v, %v", b, back.Kind, err)
		}
	}
	if KindShared.String() != "shared" || KindDirectory.String() != "directory" {
		t.Errorf("names: %s, %s", KindShared, KindDirectory)
	}
	var k Kind
	if err := k.UnmarshalText([]byte("sharde")); err == nil {
		t.Error("an unknown name was accepted")
	}
	if _, err := numKinds.MarshalText(); err == nil {
		t.Error("an unknown kind was written")
	}
}
