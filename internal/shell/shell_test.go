package shell

import "testing"

func TestJoin(t *testing.T) {
	for want, words := range map[string][]string{
		`python3 train.py --lr=0.1`:  {"python3", "train.py", "--lr=0.1"},
		`python3 -c 'print("a b")'`:  {"python3", "-c", `print("a b")`},
		`echo 'it'\''s' ''`:          {"echo", "it's", ""},
		`user@host:/data/%d,x+y ./a`: {"user@host:/data/%d,x+y", "./a"},
	} {
		if got := Join(words); got != want {
			t.Errorf("Join(%q) = %s, want %s", words, got, want)
		}
	}
}
