package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/flumego/filechannel/channel"
)

// TestDedupUnsupported: Open refuses Config.Dedup before it dials a broker,
// saying that Kafka does not support it.
func TestDedupUnsupported(t *testing.T) {
	_, err := Open(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Dedup: channel.Dedup{Header: "id"}})
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "Dedup") {
		t.Fatalf("Open with Dedup: %v, want ErrUnsupported and ErrBadConfig naming Dedup", err)
	}
}
