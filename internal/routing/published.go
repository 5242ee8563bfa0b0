package routing

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// PublishedTable is a table in the routing ConfigMap's form: Data or BinaryData holds it (see
// ConfigMapKey and CompressedConfigMapKey), the other is nil. Both sides go through EncodeTable
// and DecodeTable, so the form is defined here only.
type PublishedTable struct {
	Data       map[string]string
	BinaryData map[string][]byte
	// Hash is Table.Hash, for HashAnnotation.
	Hash string
}

// Size is the number of data bytes (keys and values: a little more than the API server counts
// against its limit, which is the values').
func (p *PublishedTable) Size() int {
	n := 0
	for k, v := range p.Data {
		n += len(k) + len(v)
	}
	for k, v := range p.BinaryData {
		n += len(k) + len(v)
	}
	return n
}

// Compressed reports whether the table is in its gzip form.
func (p *PublishedTable) Compressed() bool { return p.BinaryData != nil }

// Equal reports whether a ConfigMap's data and binaryData hold exactly p: the other form's key
// absent too, so a switch between the forms is not mistaken for an intact object.
func (p *PublishedTable) Equal(data map[string]string, binaryData map[string][]byte) bool {
	if _, ok := data[ConfigMapKey]; ok != (p.Data != nil) {
		return false
	}
	if _, ok := binaryData[CompressedConfigMapKey]; ok != (p.BinaryData != nil) {
		return false
	}
	return data[ConfigMapKey] == p.Data[ConfigMapKey] && bytes.Equal(binaryData[CompressedConfigMapKey], p.BinaryData[CompressedConfigMapKey])
}

// ErrTooLarge is returned (wrapped) when a table or the credentials exceed MaxObjectBytes even
// in their smallest form.
var ErrTooLarge = errors.New("too large for one object")

// EncodeTable renders t for the routing ConfigMap: indented JSON while that is at most
// PlainTableLimit bytes, gzip of compact JSON beyond. The result is a function of the table
// (gzip writes no timestamp), so an unchanged table renders to the same bytes.
func EncodeTable(t *Table) (*PublishedTable, error) {
	compact, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the routing table: %w", err)
	}
	out := &PublishedTable{Hash: hashJSON(compact)}
	// Indenting only adds bytes, so a compact form over the limit needs no indenting to decide.
	if len(compact) <= PlainTableLimit {
		var ind bytes.Buffer
		if err := json.Indent(&ind, compact, "", "  "); err != nil {
			return nil, fmt.Errorf("failed to indent the routing table: %w", err)
		}
		if ind.Len() <= PlainTableLimit {
			out.Data = map[string]string{ConfigMapKey: ind.String()}
			return out, nil
		}
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(compact); err != nil {
		return nil, fmt.Errorf("failed to compress the routing table: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("failed to compress the routing table: %w", err)
	}
	out.BinaryData = map[string][]byte{CompressedConfigMapKey: z.Bytes()}
	if n := out.Size(); n > MaxObjectBytes {
		return nil, fmt.Errorf("the routing table is %d bytes compressed (%d as JSON), over the %d bytes one ConfigMap may hold: %w",
			n, len(compact), MaxObjectBytes, ErrTooLarge)
	}
	return out, nil
}

// maxTableBytes bounds a decompressed table: 30 times the scale the proxy is benchmarked for, so
// a corrupt or hostile object cannot make the proxy allocate without bound.
const maxTableBytes = 64 << 20

// DecodeTable reads a table from a routing ConfigMap's data and binaryData, in either form. A
// ConfigMap holding both is refused: the controller writes one, so one of them is stale. The
// table carries no credentials (see DecodeCredentials).
//
// Compatibility: a proxy of this version reads what every earlier controller wrote (plain JSON
// under ConfigMapKey), so proxies may be upgraded before the controller. The other way round
// works only while the table stays under PlainTableLimit: a proxy older than the compressed form
// does not read CompressedConfigMapKey, refuses the ConfigMap and keeps its last table. Upgrade
// the proxies first, or together with the controller.
func DecodeTable(data map[string]string, binaryData map[string][]byte) (*Table, error) {
	plain, hasPlain := data[ConfigMapKey]
	z, hasZ := binaryData[CompressedConfigMapKey]
	var raw []byte
	switch {
	case hasPlain && hasZ:
		return nil, fmt.Errorf("both %s and %s are set; the controller writes one of them", ConfigMapKey, CompressedConfigMapKey)
	case hasPlain:
		raw = []byte(plain)
	case hasZ:
		r, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, fmt.Errorf("%s is not gzip: %w", CompressedConfigMapKey, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(r, maxTableBytes+1)); err != nil {
			return nil, fmt.Errorf("%s is not valid gzip: %w", CompressedConfigMapKey, err)
		}
		if len(raw) > maxTableBytes {
			return nil, fmt.Errorf("%s holds more than %d bytes of JSON", CompressedConfigMapKey, maxTableBytes)
		}
	default:
		return nil, fmt.Errorf("no %s or %s key", ConfigMapKey, CompressedConfigMapKey)
	}
	t := &Table{}
	if err := json.Unmarshal(raw, t); err != nil {
		return nil, fmt.Errorf("not a routing table: %w", err)
	}
	t.upgradeChannelRefs()
	return t, nil
}

// upgradeChannelRefs reads a table written before channels were namespaced, when a policy named
// its candidates by channel name alone (names were unique across namespaces then, and a policy's
// channels are in its namespace): such a name becomes the channel's ID.
func (t *Table) upgradeChannelRefs() {
	for i := range t.Policies {
		p := &t.Policies[i]
		for j := range p.Channels {
			ref := &p.Channels[j]
			if _, ok := t.Channel(ref.Channel); ok || p.Namespace == "" || strings.Contains(ref.Channel, "/") {
				continue
			}
			id := ChannelID(p.Namespace, ref.Channel)
			if _, ok := t.Channel(id); ok {
				ref.Channel = id
			}
		}
	}
}

// KeyFor returns a channel's key from the credentials Secret's keys: by its ID, or by its name
// alone as controllers wrote them before channels were namespaced.
func KeyFor(keys map[string]Secret, c *Channel) (Secret, bool) {
	if k, ok := keys[c.ID()]; ok {
		return k, true
	}
	k, ok := keys[c.Name]
	return k, ok
}

// EncodeCredentials renders the keys for the credentials Secret (CredentialsKey), as indented
// JSON: the keys are random and would not compress. The map's keys are opaque channel references.
func EncodeCredentials(keys map[string]Secret) ([]byte, error) {
	plain := make(map[string]string, len(keys))
	for name, s := range keys {
		plain[name] = s.Reveal()
	}
	b, err := json.MarshalIndent(plain, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to encode the credentials: %w", err)
	}
	if n := len(CredentialsKey) + len(b); n > MaxObjectBytes {
		return nil, fmt.Errorf("the credentials of %d channels are %d bytes, over the %d bytes one Secret may hold: %w",
			len(keys), n, MaxObjectBytes, ErrTooLarge)
	}
	return b, nil
}

// DecodeCredentials reads what EncodeCredentials wrote.
func DecodeCredentials(b []byte) (map[string]Secret, error) {
	var plain map[string]string
	if err := json.Unmarshal(b, &plain); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object of keys: %w", CredentialsKey, err)
	}
	out := make(map[string]Secret, len(plain))
	for name, k := range plain {
		out[name] = NewSecret(k)
	}
	return out, nil
}
