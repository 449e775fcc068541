package hub

import (
	"context"
	"sync"
)

// Redis answers a connection's commands in the order they were sent. So
// an error reply on a PubSub is matched to its command by that order. A
// refused UNSUBSCRIBE or PING (an ACL without +unsubscribe or +ping) is
// then never taken for the refusal of a SUBSCRIBE pending beside it.

// cmdKind is a command the hub sends on a PubSub.
type cmdKind uint8

const (
	subscribeCmd cmdKind = iota + 1 // SUBSCRIBE or SSUBSCRIBE
	unsubscribeCmd
	pingCmd
)

// sentCmd is a command sent and not answered yet.
type sentCmd struct {
	kind cmdKind
	name string   // its channel ("" for a PING)
	c    *channel // a SUBSCRIBE's channel
}

// sentCmds are a connection's commands awaiting their replies, oldest
// first.
//
// go-redis sends commands of its own. After a reconnection it subscribes
// every channel again, before anything else on the new connection. Their
// confirmations match no command sent, and are skipped. The commands sent
// on the old connection are forgotten when the receive loop sees it
// break. A refusal that finds no command sent is go-redis's
// resubscription, refused. It is taken for a subscription's refusal:
// every channel not live fails, and its listeners poll.
//
// The record is exact but for one window. A command may be sent on the
// new connection before the receive loop has seen the old one break. It
// is forgotten with the old ones. A refusal of it is matched to the
// command sent after it, if any.
type sentCmds struct {
	// writing is held while a command is recorded and written. So the
	// order recorded is the wire's. mu guards the record, so the receive
	// loop never waits for a write.
	writing sync.Mutex
	mu      sync.Mutex
	cmds    []sentCmd
}

// send records cmd and writes it with write. The order recorded is the
// order on the wire. A write that fails makes go-redis close the
// connection and open another. No command sent on the old one will be
// answered, so the record is emptied.
func (s *sentCmds) send(ctx context.Context, cmd sentCmd, write func(ctx context.Context) error) error {
	s.writing.Lock()
	defer s.writing.Unlock()
	s.mu.Lock()
	s.cmds = append(s.cmds, cmd)
	s.mu.Unlock()
	err := write(ctx)
	if err != nil {
		s.forget()
	}
	return err
}

// answered takes the oldest command when a reply of its kind and channel
// comes. A confirmation of go-redis's own resubscription matches none. It
// takes nothing.
func (s *sentCmds) answered(kind cmdKind, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cmds) > 0 && s.cmds[0].kind == kind && s.cmds[0].name == name {
		s.cmds = s.cmds[1:]
	}
}

// refused takes the oldest command, which an error reply answers. It
// returns false when none was sent.
func (s *sentCmds) refused() (sentCmd, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cmds) == 0 {
		return sentCmd{}, false
	}
	cmd := s.cmds[0]
	s.cmds = s.cmds[1:]
	return cmd, true
}

// forget drops every command sent. Their connection broke, so their
// replies will not come.
func (s *sentCmds) forget() {
	s.mu.Lock()
	s.cmds = nil
	s.mu.Unlock()
}
