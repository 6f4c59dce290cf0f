package workerline

import "testing"

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		fd       int
		peer, id string
		funcs    []string
		want     string
	}{
		{12, "127.0.0.1", "", nil, "12 127.0.0.1 - :\n"},
		{12, "127.0.0.1", "client-7", []string{"f"}, "12 127.0.0.1 client-7 : f\n"},
		{-1, "unix:/run/c.sock", "worker-3", []string{"a", "b"}, "-1 unix:/run/c.sock worker-3 : a b\n"},
	} {
		if got := string(Append([]byte("x\n"), tc.fd, tc.peer, tc.id, tc.funcs)); got != "x\n"+tc.want {
			t.Errorf("Append(%d, %q, %q, %q) = %q, want %q", tc.fd, tc.peer, tc.id, tc.funcs, got, "x\n"+tc.want)
		}
		if got := string(Append(nil, tc.fd, tc.peer, []byte(tc.id), tc.funcs)); got != tc.want {
			t.Errorf("Append with a []byte id = %q, want %q", got, tc.want)
		}
	}
}
