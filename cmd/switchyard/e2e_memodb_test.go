package main

// The MemoDB frontend (--memodb-listen) end to end: a real switchyard
// process and a real C peer, Debian's nngcat (nng-utils), as a MemoDB
// client sending a JOB and as a MemoDB worker (a REQ socket sending READY,
// then RESULT), with the CBOR messages built here and passed as files.
// nngcat sends its file once, prints the one reply raw and exits.
//
// gearmand has no MemoDB frontend: run against it, these tests skip.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	codec "switchyard/codec/memodb"
)

// nngcatTimeout bounds one nngcat exchange: a failure, not a pace.
const nngcatTimeout = 20 * time.Second

func requireNngcat(t *testing.T) string {
	t.Helper()
	if isGearmand(t) {
		t.Skip("gearmand has no MemoDB frontend")
	}
	return requireTool(t, "nngcat")
}

// startMemodb starts switchyard with a MemoDB listener on a port the
// kernel picks and returns the server and that listener's URL.
func startMemodb(t *testing.T, extraArgs ...string) (*serverProc, string) {
	t.Helper()
	srv, others := startServerPorts(t, 2, append([]string{"--memodb-listen", "tcp://127.0.0.1:0"}, extraArgs...)...)
	return srv, "tcp://" + others[0]
}

// nngcatReq starts nngcat as a REQ socket sending msg (from a file) to url;
// wait returns the reply it printed.
func nngcatReq(t *testing.T, bin, url string, msg []byte) (wait func() []byte) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "msg.cbor")
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nngcatTimeout)
	cmd := exec.CommandContext(ctx, bin, "--req", "--dial", url, "--raw", "--file", file,
		"--recv-timeout", "15", "--recv-maxsz", "0")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	return func() []byte {
		t.Helper()
		defer cancel()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("nngcat: %v\n%s", err, errOut.String())
		}
		return out.Bytes()
	}
}

// decodeReply decodes what nngcat printed.
func decodeReply(t *testing.T, b []byte, want codec.Type) codec.Message {
	t.Helper()
	var m codec.Message
	if err := codec.Decode(b, codec.Reply, &m); err != nil {
		t.Fatalf("nngcat printed % x: %v", b, err)
	}
	if m.Type != want {
		t.Fatalf("nngcat got %s %+v, want %s", m.Type, m, want)
	}
	return m
}

// nngcat as a client and as a worker, and each with Gearman on the other
// side: a MemoDB client's job run by a Gearman worker, a Gearman client's
// job run by a MemoDB worker, a MemoDB client's job run by a MemoDB
// worker; every result reaches the client that asked.
func TestE2EMemodbNngcat(t *testing.T) {
	t.Parallel()
	nngcat := requireNngcat(t)
	srv, url := startMemodb(t, "--memodb-heartbeat", "1s")

	t.Run("nngcat client, Gearman worker", func(t *testing.T) {
		g := dialGear(t, srv.addr, "gearman worker")
		g.send(pCanDo, "upper")
		wait := nngcatReq(t, nngcat, url, append(codec.AppendJob(nil, nil, "upper", 30000), "from nngcat"...))
		job := g.grabJob(nngcatTimeout)
		if job[1] != "upper" || job[2] != "from nngcat" {
			t.Fatalf("the Gearman worker got %q", job)
		}
		g.send(pWorkComplete, job[0], "FROM NNGCAT")
		m := decodeReply(t, wait(), codec.Result)
		if len(m.ID) != 0 || string(m.Payload) != "FROM NNGCAT" {
			t.Fatalf("nngcat's result: %+v", m)
		}
	})

	t.Run("Gearman client, nngcat worker", func(t *testing.T) {
		c := dialGear(t, srv.addr, "gearman client")
		handle := c.submit(pSubmitJob, "lower", "", "FROM GEARMAN")
		m := decodeReply(t, nngcatReq(t, nngcat, url, codec.AppendReady(nil, []string{"lower"}))(), codec.Job)
		if len(m.ID) != codec.IDLen || m.Service != "lower" || m.Timeout != 0 || string(m.Payload) != "FROM GEARMAN" {
			t.Fatalf("nngcat's JOB: %+v", m)
		}
		// The RESULT from another nngcat, another socket: the id is what
		// names the worker. Its reply is a HEARTBEAT, a second on.
		hb := decodeReply(t, nngcatReq(t, nngcat, url, append(codec.AppendResult(nil, m.ID), "from nngcat"...))(), codec.Heartbeat)
		if !bytes.Equal(hb.ID, m.ID) {
			t.Fatalf("HEARTBEAT to %x, want %x", hb.ID, m.ID)
		}
		c.expect(pWorkComplete, handle+"\x00from nngcat")
	})

	t.Run("nngcat client, nngcat worker", func(t *testing.T) {
		worker := nngcatReq(t, nngcat, url, codec.AppendReady(nil, []string{"echo", "other"}))
		client := nngcatReq(t, nngcat, url, append(codec.AppendJob(nil, nil, "echo", 5000), "\x82\x01\x02"...))
		m := decodeReply(t, worker(), codec.Job)
		if m.Service != "echo" || m.Timeout != 5000 || string(m.Payload) != "\x82\x01\x02" {
			t.Fatalf("nngcat's JOB: %+v", m)
		}
		done := nngcatReq(t, nngcat, url, append(codec.AppendResultDisconnecting(nil, m.ID), "\x82\x00\xf5"...))
		decodeReply(t, done(), codec.Disconnect)
		r := decodeReply(t, client(), codec.Result)
		if string(r.Payload) != "\x82\x00\xf5" {
			t.Fatalf("nngcat's result: % x", r.Payload)
		}
	})
}
