package dashboard

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
)

// The dashboard checks witnesses' cosignatures as internal/tlog does: a
// cosignature made by torchwood's signer verifies, one forged with the
// witness's key hash does not, a witness that did not cosign is neither,
// and a vkey that is not a cosignature/v1 key is refused.
func TestCosignaturesAreTheGoCosignatures(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed (it runs the dashboard's tlog module)")
	}
	mod, err := filepath.Abs("static/js/tlog.js")
	if err != nil {
		t.Fatal(err)
	}
	priv, _, err := tlog.GenerateKey("log.example", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := tlog.Sign(tlog.Checkpoint{Origin: tlog.Origin("auditrail", uuid.New(), tlog.KindAudit), Size: 9, Time: time.Now()}, priv)
	if err != nil {
		t.Fatal(err)
	}
	signer := func(name string) (*torchwood.CosignatureSigner, tlog.WitnessKey) {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err := torchwood.NewCosignatureSigner(name, k)
		if err != nil {
			t.Fatal(err)
		}
		wk, err := tlog.ParseWitnessKey(s.Verifier().String())
		if err != nil {
			t.Fatal(err)
		}
		return s, wk
	}
	// a's key is one whose base64 holds a '+' (the vkey's separator).
	a, ak := signer("witness.example/a")
	for strings.Count(ak.String(), "+") < 3 {
		a, ak = signer("witness.example/a")
	}
	b, bk := signer("witness.example/b")
	_, ck := signer("witness.example/c")
	text, _, _ := tlog.SplitNote(msg)
	line := func(s *torchwood.CosignatureSigner) string {
		signed, err := note.Sign(&note.Note{Text: string(text)}, s)
		if err != nil {
			t.Fatal(err)
		}
		_, lines, _ := tlog.SplitNote(signed)
		return lines[0] + "\n"
	}
	// b's line with its last signature byte changed: forged.
	bl := strings.TrimSuffix(line(b), "\n")
	i := strings.LastIndexByte(bl, ' ')
	sig, _ := base64.StdEncoding.DecodeString(bl[i+1:])
	sig[len(sig)-1] ^= 1
	cosigned := string(msg) + line(a) + bl[:i+1] + base64.StdEncoding.EncodeToString(sig) + "\n"

	goValid, goProblems, err := tlog.Cosignatures([]byte(cosigned), []tlog.WitnessKey{ak, bk, ck})
	if err != nil || len(goValid) != 1 || len(goProblems) != 1 {
		t.Fatalf("Go: %v %v %v", goValid, goProblems, err)
	}
	script := `import { parseWitnessKey, cosignatures } from ` + jsString(mod) + `;
const keys = [];
for (const v of ` + jsString(ak.String()+" "+bk.String()+" "+ck.String()) + `.split(" ")) keys.push(await parseWitnessKey(v));
const bad = await parseWitnessKey(` + jsString("log.example+"+priv.KeyID()+"+AAAA") + `);
const r = await cosignatures(` + jsString(cosigned) + `, keys);
console.log(JSON.stringify({ ...r, parsed: keys.filter(Boolean).length, bad }));`
	out, err := exec.Command(node, "--input-type=module", "-e", script).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		Valid, Forged []string
		Parsed        int
		Bad           any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !slices.Equal(got.Valid, []string{goValid[0].Witness.Name}) || !slices.Equal(got.Forged, []string{goProblems[0].Witness.Name}) || got.Parsed != 3 || got.Bad != nil {
		t.Fatalf("the dashboard says %+v; internal/tlog: valid %s, forged %s", got, goValid[0].Witness.Name, goProblems[0].Witness.Name)
	}
}
