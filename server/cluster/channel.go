package cluster

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"herd/agent/event"
	"herd/models"
)

// The channel (docs/DESIGN.md §14): any PostgreSQL role that can connect
// may LISTEN and NOTIFY on any channel, so every notice is sealed with a
// key only herd's role can read (models.ChannelKeys): a listener without
// it reads nothing of users' text, nor which threads are busy, and a
// notice it makes, or alters, is refused.
//
// A notice on the wire is the base64 (NOTIFY takes text) of
//
//	sender [15] | key id [2] | counter [8] | sent at [8] | AES-256-GCM(notice JSON) [+16]
//
// the header in the clear and authenticated as the seal's additional
// data. sender is a random id this process took at start: the listener
// tells its own notices by the 20 characters it encodes to, without
// opening them. Each sender seals with a key of its own, derived from the
// channel key and its id (HKDF-SHA256), under its counter as the nonce:
// the counter never repeats for a sender, so no key and nonce are ever
// used twice, however many notices the instances send (random nonces
// under one shared key would be safe for 2^32 notices only).
//
// Replays. A receiver takes a sender's counter once (a window of the
// last replayWindowBits counters, since a delete's notice, sent on a pool
// connection, may overtake or trail the sender's batches), refuses a
// notice sent more than noticeMaxAge ago or before it first listened (it
// has not heard the counters before that), and forgets a sender silent
// for twice noticeMaxAge, whose notices are all too old by then. "Sent
// at" is the database's clock as the sender estimates it (the offset is
// measured each time it reads the keys), so instances on machines whose
// clocks differ agree, as leases do. What a replay could still do — a
// notice whose original this instance missed while its listener was
// away, taken once within the minute — is what the late original would
// have done; the token switch's notice is read back from the database
// rather than believed (Cluster.broadcasted).

const (
	senderLen = 15 // whole base64 characters: the own prefix is a string prefix
	headerLen = senderLen + 2 + 8 + 8
	tagLen    = 16
	// maxPayload is the longest NOTIFY payload: PostgreSQL takes those
	// shorter than 8000 bytes.
	maxPayload = 7999
	// maxPlain bounds a notice's JSON: sealed and encoded, it is at most
	// maxPayload.
	maxPlain = maxPayload*3/4 - headerLen - tagLen
	// minPayload is the shortest sealed notice, "{}" sealed.
	minPayload = (4*(headerLen+2+tagLen) + 2) / 3
)

// noticeMaxAge bounds how long ago a notice may have been sent: one later
// is a replay, or comes from a listener so far behind that the reconnect's
// catch-up serves its pages better.
const noticeMaxAge = time.Minute

// replayWindowBits is how far back, in a sender's counters, a notice not
// seen yet is still taken.
const replayWindowBits = 1 << 14

// Why a notice was refused: the reason label of
// herd_cluster_notices_refused_total.
const (
	refusedPlaintext  = "plaintext"   // JSON in the clear: an older herd, or a forgery
	refusedMalformed  = "malformed"   // not a sealed notice at all
	refusedUnknownKey = "unknown_key" // sealed with a key not in channel_keys
	refusedForged     = "forged"      // does not open with the key
	refusedStale      = "stale"       // sent too long ago, or before this instance listened
	refusedReplayed   = "replayed"    // its counter was taken already, or left the window
	refusedNotAllowed = "not_allowed" // a kind or frame type this instance does not take
)

// RefusalReasons are the reasons a notice is refused for, the values of
// Options.OnRefused's reason: each a metric series from the start.
var RefusalReasons = []string{refusedPlaintext, refusedMalformed, refusedUnknownKey, refusedForged, refusedStale, refusedReplayed, refusedNotAllowed}

// refusalHints say what an operator should make of each reason.
var refusalHints = map[string]string{
	refusedPlaintext:  "an unsealed notice: a herd older than this one serves the database (upgrade every instance together), or another login is writing on herd's channel",
	refusedMalformed:  "not a sealed notice: another login is writing on herd's channel; revoke its access (docs/OPERATIONS.md, Who may connect)",
	refusedUnknownKey: "sealed with a key not in channel_keys: a key removed before the instances stopped using it, or a foreign herd on this channel",
	refusedForged:     "not sealed with this database's channel key: another login is writing on herd's channel; revoke its access (docs/OPERATIONS.md, Who may connect)",
	refusedStale:      "sent over a minute ago or before this instance listened: a replay, or a listener far behind",
	refusedReplayed:   "a notice received before, sent again: a replay",
	refusedNotAllowed: "a kind or frame type this herd does not take: a newer herd on the database?",
}

type senderID [senderLen]byte

// noticeJSON decodes an opened notice with go-json-experiment/json (the
// encoding/json/v2 to be), taking what encoding/json took: every instance
// opens every other's notices, and with it a notice sealed, opened and
// decoded costs less than one encoded and decoded in the clear with
// encoding/json did (BenchmarkNoticeSealOpen: 4.7 µs and 6 allocations,
// against 7.1 µs and 12).
var noticeJSON = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// channel seals this instance's notices and opens the others'. Sealing is
// safe from any goroutine; opening is the listener's alone.
type channel struct {
	me      senderID
	own     string // what this sender's payloads start with
	counter atomic.Uint64
	keys    atomic.Pointer[keySet]
	offset  atomic.Int64 // the database's clock minus this machine's, ns
	now     func() time.Time

	// The listener's.
	since time.Time // database time of the first LISTEN
	peers map[senderID]*peer
	raw   []byte
	buf   []byte
	nonce [12]byte
}

// keySet is the channel's keys as last read, and the one this sender
// seals with.
type keySet struct {
	keys   map[uint16][]byte
	sealID uint16
	seal   cipher.AEAD // this sender's key under sealID
}

// peer is what a receiver knows of another sender.
type peer struct {
	keys *keySet // the set aeads were derived from
	aead map[uint16]cipher.AEAD
	win  replayWindow
	last time.Time // this machine's clock at its last notice
}

func newChannel(now func() time.Time) *channel {
	ch := &channel{now: now, peers: map[senderID]*peer{}}
	_, _ = rand.Read(ch.me[:])
	ch.own = base64.RawStdEncoding.EncodeToString(ch.me[:])
	return ch
}

// setKeys adopts the keys read between sent and got. It seals with the
// newest key older than grace, which every live instance has read by then
// (each reads them as it renews its lease, and grace is the lease), or the
// oldest while none is; it opens with any. An unchanged set is kept as
// it is, with what its peers derived from it.
func (ch *channel) setKeys(ck models.ChannelKeys, grace time.Duration, sent, got time.Time) error {
	mid := sent.Add(got.Sub(sent) / 2)
	ch.offset.Store(int64(ck.Now.Sub(mid)))
	ks := &keySet{keys: map[uint16][]byte{}}
	newest := -1
	for _, k := range ck.Keys {
		if k.ID < 1 || k.ID > 65535 || len(k.Key) != models.ChannelKeyLen {
			return fmt.Errorf("cluster: channel key %d: not a %d-byte key with an id from 1 to 65535", k.ID, models.ChannelKeyLen)
		}
		ks.keys[uint16(k.ID)] = k.Key
		if k.Age >= grace && k.ID > newest {
			newest = k.ID
		}
	}
	if len(ck.Keys) == 0 {
		return errors.New("cluster: no channel key")
	}
	if newest < 0 {
		newest = ck.Keys[0].ID // read oldest first
	}
	ks.sealID = uint16(newest)
	if old := ch.keys.Load(); old != nil && old.sameAs(ks) {
		return nil
	}
	aead, err := senderAEAD(ks.keys[ks.sealID], ch.me)
	if err != nil {
		return err
	}
	ks.seal = aead
	ch.keys.Store(ks)
	return nil
}

func (ks *keySet) sameAs(o *keySet) bool {
	if ks.sealID != o.sealID || len(ks.keys) != len(o.keys) {
		return false
	}
	for id, k := range ks.keys {
		if ok := o.keys[id]; string(ok) != string(k) {
			return false
		}
	}
	return true
}

// senderAEAD is sender's key under the channel key.
func senderAEAD(key []byte, sender senderID) (cipher.AEAD, error) {
	sk, err := hkdf.Key(sha256.New, key, nil, "herd notice key "+string(sender[:]), 32)
	if err != nil {
		return nil, fmt.Errorf("cluster: derive a sender's key: %w", err)
	}
	block, err := aes.NewCipher(sk)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// dbNow is the database's clock, as this instance estimates it.
func (ch *channel) dbNow() time.Time {
	return ch.now().Add(time.Duration(ch.offset.Load()))
}

// noticeEncoder is an encoder, its buffer (event.Encoder: the JSON of a
// frame's data is the bytes the hub sends), and a sealed notice's payload
// and nonce (channel.seal), reused: a nonce handed to the cipher would
// otherwise be allocated for each notice.
type noticeEncoder struct {
	*event.Encoder
	b64   []byte
	nonce [12]byte
}

var encoders = sync.Pool{New: func() any { return &noticeEncoder{Encoder: event.NewEncoder()} }}

var errNoticeTooLong = errors.New("cluster: a notice longer than a payload")

// seal encodes and seals n with e: one allocation, the payload. Notices
// are bounded to fit (maxNoticeBytes, maxNoticeText); one that does not
// is an error, never cut.
func (ch *channel) seal(e *noticeEncoder, n *notice) (string, error) {
	ks := ch.keys.Load()
	if ks == nil {
		return "", errors.New("cluster: no channel key read yet")
	}
	var hdr [headerLen]byte
	copy(hdr[:], ch.me[:])
	binary.BigEndian.PutUint16(hdr[senderLen:], ks.sealID)
	ctr := ch.counter.Add(1)
	binary.BigEndian.PutUint64(hdr[senderLen+2:], ctr)
	binary.BigEndian.PutUint64(hdr[senderLen+10:], uint64(ch.dbNow().UnixMilli()))
	b, err := e.Encode(hdr[:], n, tagLen) // the seal stays in the buffer
	if err != nil {
		return "", err
	}
	plain := b[headerLen:]
	if len(plain) > maxPlain {
		return "", fmt.Errorf("%w: %s of %d bytes", errNoticeTooLong, n.Kind, len(plain))
	}
	binary.BigEndian.PutUint64(e.nonce[4:], ctr)
	sealed := ks.seal.Seal(plain[:0], e.nonce[:], plain, b[:headerLen])
	e.b64 = base64.RawStdEncoding.AppendEncode(e.b64[:0], b[:headerLen+len(sealed)])
	return string(e.b64), nil
}

// open checks and opens payload into n; it returns why it refused it, or
// "" when n is another instance's notice, unaltered, sent once and lately.
func (ch *channel) open(payload string, n *notice) string {
	if strings.HasPrefix(payload, "{") {
		return refusedPlaintext
	}
	if len(payload) < minPayload || len(payload) > maxPayload {
		return refusedMalformed
	}
	ch.raw = append(ch.raw[:0], payload...)
	var err error
	if ch.buf, err = base64.RawStdEncoding.AppendDecode(ch.buf[:0], ch.raw); err != nil {
		return refusedMalformed
	}
	b := ch.buf
	var sender senderID
	copy(sender[:], b)
	keyID := binary.BigEndian.Uint16(b[senderLen:])
	ctr := binary.BigEndian.Uint64(b[senderLen+2:])
	sent := time.UnixMilli(int64(binary.BigEndian.Uint64(b[senderLen+10:])))
	ks := ch.keys.Load()
	if ks == nil || ks.keys[keyID] == nil {
		return refusedUnknownKey
	}
	p := ch.peers[sender]
	aead, err := p.aeadFor(ks, keyID, sender)
	if err != nil {
		return refusedUnknownKey
	}
	binary.BigEndian.PutUint64(ch.nonce[4:], ctr)
	ct := b[headerLen:]
	plain, err := aead.Open(ct[:0], ch.nonce[:], ct, b[:headerLen])
	if err != nil {
		return refusedForged
	}
	if now := ch.dbNow(); sent.Before(ch.since) || now.Sub(sent).Abs() > noticeMaxAge {
		return refusedStale
	}
	if p != nil && !p.win.fresh(ctr) {
		return refusedReplayed
	}
	if err := jsonv2.Unmarshal(plain, n, noticeJSON); err != nil {
		return refusedMalformed
	}
	if p == nil {
		p = ch.addPeer(sender)
		p.keys, p.aead = ks, map[uint16]cipher.AEAD{keyID: aead}
	}
	p.win.mark(ctr)
	p.last = ch.now()
	return ""
}

// aeadFor is sender's key under key id of ks, derived once per peer; p
// may be nil (a sender not heard from yet).
func (p *peer) aeadFor(ks *keySet, id uint16, sender senderID) (cipher.AEAD, error) {
	if p != nil {
		if p.keys != ks {
			p.keys, p.aead = ks, map[uint16]cipher.AEAD{}
		}
		if a, ok := p.aead[id]; ok {
			return a, nil
		}
	}
	a, err := senderAEAD(ks.keys[id], sender)
	if err == nil && p != nil {
		p.aead[id] = a
	}
	return a, err
}

// addPeer notes a sender first heard from, and forgets those silent for
// twice noticeMaxAge (every restart of an instance is a new sender).
func (ch *channel) addPeer(sender senderID) *peer {
	now := ch.now()
	for id, p := range ch.peers {
		if now.Sub(p.last) > 2*noticeMaxAge {
			delete(ch.peers, id)
		}
	}
	p := &peer{}
	ch.peers[sender] = p
	return p
}

// replayWindow holds which of a sender's last replayWindowBits counters
// were taken, as a ring of bits.
type replayWindow struct {
	top  uint64 // the highest counter taken (counters start at 1)
	bits [replayWindowBits / 64]uint64
}

// fresh reports whether counter c was not taken and is in the window.
func (w *replayWindow) fresh(c uint64) bool {
	if c > w.top {
		return true
	}
	if c == 0 || w.top-c >= replayWindowBits {
		return false
	}
	return w.bits[(c/64)%uint64(len(w.bits))]&(1<<(c%64)) == 0
}

// mark takes counter c, which fresh allowed.
func (w *replayWindow) mark(c uint64) {
	if c > w.top {
		if c-w.top >= replayWindowBits {
			clear(w.bits[:])
		} else {
			for i := w.top + 1; i < c; i++ {
				w.bits[(i/64)%uint64(len(w.bits))] &^= 1 << (i % 64)
			}
		}
		w.top = c
	}
	w.bits[(c/64)%uint64(len(w.bits))] |= 1 << (c % 64)
}

// loadKeys reads the channel's keys, at start and with each renewal of
// the lease: a key added to rotate them is opened by every instance
// within a renewal, and sealed with after a lease.
func (c *Cluster) loadKeys(ctx context.Context) error {
	sent := time.Now()
	ck, err := c.o.Store.ChannelKeys(ctx)
	if err != nil {
		return fmt.Errorf("cluster: read the channel key: %w", err)
	}
	return c.ch.setKeys(ck, c.o.Lease, sent, time.Now())
}

// checkKeyReaders warns when roles other than herd's can read the
// channel's keys: each of them could read and forge notices.
func (c *Cluster) checkKeyReaders(ctx context.Context) {
	names, err := c.o.Store.ChannelKeyReaders(ctx)
	switch {
	case err != nil:
		c.log.Warn("cluster: could not check who can read the channel key", "err", err)
	case len(names) > 0:
		c.log.Error("cluster: other roles can read the channel key and so read and forge the instances' notices; revoke their access to channel_keys (docs/OPERATIONS.md, PostgreSQL)",
			"roles", strings.Join(names, ", "))
	}
}

// refuse counts a notice refused for reason, and logs it: the first, and
// then at most a line a minute with how many came since, so that a flood
// of forgeries cannot flood the log. The listener's.
func (c *Cluster) refuse(reason string) {
	if c.o.OnRefused != nil {
		c.o.OnRefused(reason)
	}
	c.refused++
	now := time.Now()
	if !c.refusedLogged.IsZero() && now.Sub(c.refusedLogged) < time.Minute {
		return
	}
	c.log.Warn("cluster: refused a notice on the channel", "reason", reason, "refused", c.refused, "why", refusalHints[reason])
	c.refused, c.refusedLogged = 0, now
}
