// Package verifycmd is `auditrail verify`: verify an organization's log against pinned public keys, an export offline or online through the API.
package verifycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/verify"
)

// Run checks an organization's log offline (an export against a
// signed checkpoint and the public keys) or online (through the API,
// against the pinned public keys). Exit 0 only when everything verifies; 1
// with what is wrong where; 2 for a usage mistake.
func Run(ctx context.Context, args []string) error { return verifyCmd(ctx, args, os.Stdout) }

// verifyCmd is runVerify printing the report on stdout.
func verifyCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlags("auditrail verify")
	export := fs.String("export", "", "", "the JSONL export to verify (GET …/audit_logs/export?format=jsonl or …/tool_executions/export): one entry per line with its leaf_index, the last line possibly its checkpoint")
	checkpoint := fs.String("checkpoint", "", "", "a file holding the signed checkpoint to verify against (optional when the export ends with one)")
	keys := fs.String("keys", "", "", "the public keys the checkpoint must be signed by (offline and online): the answer of GET /api/v1/audit_keys saved to a file, or its data array")
	since := fs.String("since-checkpoint", "", "", "a signed checkpoint kept from earlier: the log must extend it (a larger one means the log was rolled back)")
	base := fs.String("url", "", "", "online: the base URL of the audit API, https (http only to a loopback host); then --key, --org and --keys (the checkpoint and export are fetched)")
	apiKey := fs.String("key", "", "", "online: an API key that may read the organization (prefer the environment: a flag shows in the process list)")
	org := fs.String("org", "", "", "online: the organization to verify")
	kind := fs.String("kind", "", "audit", "online: the log to verify, audit or executions")
	save := fs.String("save-checkpoint", "", "", "online: once everything verifies, write the verified checkpoint to this file (give it as --since-checkpoint next time)")
	maxExport := fs.Int64("max-export-bytes", "", verify.DefaultMaxExportBytes, "online: the largest export written to the temporary file, in bytes; a larger one fails the verification")
	trust := fs.FlagSet.Bool("trust-server-keys", false, "online without --keys: trust the keys the server lists (GET /api/v1/audit_keys): the result then shows that the log is consistent with itself, not that it is the log those keys were published for (command line only: no environment twin)")
	wait := fs.Duration("wait", "", 0, "online: wait at most this long for a signed checkpoint that covers the newest entry listed (a new organization's first checkpoint, or the entries just recorded, come within the server's checkpoint interval); 0: verify against the latest checkpoint at once")
	grace := fs.Duration("pending-grace", "", verify.DefaultPendingGrace, "an entry not in the log yet (leaf_index null) is reported, not failed, when stored less than this before the checkpoint; older, it was inserted behind the log's back. Set it above the largest auditrail_tlog_sequencer_delay_seconds of the tlog role")
	witnesses := fs.Strings("witness", "", "a witness whose cosignature counts: its C2SP cosignature/v1 verifier key (vkey, name+hash+base64)")
	quorum := fs.Int("witness-quorum", "", -1, "how many of the --witness keys must have cosigned the checkpoint verified against (default: all of them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *grace <= 0 {
		return cli.UsageErrorf("--pending-grace %v: want a positive duration, e.g. 5m", *grace)
	}
	wkeys, k, err := witnessFlags(*witnesses, *quorum)
	if err != nil {
		return err
	}
	// The command line chooses the mode; the environment's settings of the
	// other one are ignored (the quick start exports AUDITRAIL_URL, and
	// `verify --export FILE` must still verify that file offline).
	switch {
	case fs.OnCommandLine("url") && fs.OnCommandLine("export"):
		// both: refused below
	case fs.OnCommandLine("export"):
		fs.IgnoreEnv("url", "key", "org", "kind", "save-checkpoint", "max-export-bytes", "wait")
	case fs.OnCommandLine("url"):
		fs.IgnoreEnv("export", "checkpoint")
	}
	if *base != "" {
		for _, off := range []struct{ name, value string }{{"export", *export}, {"checkpoint", *checkpoint}} {
			if off.value != "" {
				return cli.UsageErrorf("%s verifies online: %s is for an offline verification", fs.Source("url"), fs.Source(off.name))
			}
		}
		o, err := verify.ParseOnline(*base, *apiKey, *org, *kind)
		if err != nil {
			return err
		}
		switch {
		case *keys != "" && *trust:
			return cli.UsageErrorf("%s and --trust-server-keys exclude each other: --keys pins the keys the checkpoint must be signed by, --trust-server-keys takes those the server lists", fs.Source("keys"))
		case *keys != "":
			ks, err := readKeys(*keys)
			if err != nil {
				return err
			}
			o.Pinned = &ks
		case !*trust:
			return cli.UsageErrorf("--url needs --keys FILE: the public keys you trust (the answer of GET /api/v1/audit_keys saved once and checked apart from this server), so that a server that rewrote its log and signed it with a new key fails; or --trust-server-keys to take the keys the server lists, which proves that the log is consistent, not that it is authentic")
		}
		if *maxExport <= 0 {
			return cli.UsageErrorf("--max-export-bytes %d: want a positive number of bytes", *maxExport)
		}
		if o.Since, err = readCheckpoint("--since-checkpoint", *since); err != nil {
			return err
		}
		if *wait < 0 {
			return cli.UsageErrorf("--wait %v: want a duration of 0 or more, e.g. 30s", *wait)
		}
		o.Save, o.Grace, o.MaxExport, o.Wait = *save, *grace, *maxExport, *wait
		o.Witnesses, o.WitnessQuorum = wkeys, k
		return o.Run(ctx, stdout)
	}
	if *trust {
		return cli.UsageErrorf("--trust-server-keys is for --url: offline, the keys are --keys FILE")
	}
	if *wait != 0 {
		return cli.UsageErrorf("%s is for --url: an export holds the checkpoint it was verified against", fs.Source("wait"))
	}
	if *export == "" {
		return cli.UsageErrorf("--export is required (offline), or --url, --key and --org (online)")
	}
	if *keys == "" {
		return cli.UsageErrorf("--keys is required: the answer of GET /api/v1/audit_keys saved to a file")
	}
	ks, err := readKeys(*keys)
	if err != nil {
		return err
	}
	cfg := verify.Config{Keys: ks, PendingGrace: *grace, Witnesses: wkeys, WitnessQuorum: k}
	if cfg.Checkpoint, err = readCheckpoint("--checkpoint", *checkpoint); err != nil {
		return err
	}
	if cfg.Since, err = readCheckpoint("--since-checkpoint", *since); err != nil {
		return err
	}
	f, err := os.Open(*export)
	if err != nil {
		return fmt.Errorf("--export: %w", err)
	}
	defer f.Close()
	rep, err := verify.Export(ctx, f, cfg)
	if errors.Is(err, verify.ErrNoCheckpoint) {
		return cli.UsageErrorf("the export does not end with a checkpoint line: give --checkpoint (the export was cut, or made without one)")
	}
	if err != nil {
		return err
	}
	rep.Write(stdout)
	if !rep.OK() {
		return fmt.Errorf("%s: not verified", *export)
	}
	return nil
}

// witnessFlags parses --witness (vkeys) and --witness-quorum (-1: all of
// them).
func witnessFlags(vkeys []string, quorum int) ([]tlog.WitnessKey, int, error) {
	var keys []tlog.WitnessKey
	seen := map[string]bool{}
	for _, v := range vkeys {
		k, err := tlog.ParseWitnessKey(v)
		if err != nil {
			return nil, 0, cli.Usage(fmt.Errorf("--witness: %w", err))
		}
		if seen[k.String()] {
			return nil, 0, cli.UsageErrorf("--witness %s is given twice: each witness counts once", k.Name)
		}
		seen[k.String()] = true
		keys = append(keys, k)
	}
	switch {
	case quorum == -1:
		return keys, len(keys), nil
	case len(keys) == 0:
		return nil, 0, cli.UsageErrorf("--witness-quorum %d without --witness: name the witnesses whose cosignatures count", quorum)
	case quorum < 1 || quorum > len(keys):
		return nil, 0, cli.UsageErrorf("--witness-quorum %d: want 1 to %d (the number of --witness keys)", quorum, len(keys))
	}
	return keys, quorum, nil
}

func readKeys(path string) (tlog.KeySet, error) {
	b, err := readCapped(path, tlog.MaxKeysFileBytes)
	if err != nil {
		return tlog.KeySet{}, fmt.Errorf("--keys: %w", err)
	}
	ks, err := tlog.ParseKeySet(b)
	if err != nil {
		return tlog.KeySet{}, fmt.Errorf("--keys %s: %w", path, err)
	}
	return ks, nil
}

// readCheckpoint reads a checkpoint file: the signed note itself, or the
// answer of GET …/checkpoint (its data.note) — nil when path is empty.
func readCheckpoint(flag, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := readCapped(path, tlog.MaxCheckpointBytes*4)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return tlog.NoteOf(b), nil
}

// readCapped reads a file of at most max bytes.
func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}
