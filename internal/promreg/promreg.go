// Package promreg registers a channel's Prometheus collectors, labelled
// with the channel's name, for both backends (channel, channel/kafka): all
// of them or none.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrNameTaken is matched (errors.Is) by the error of Register when a
// collector of a channel of the same name is on the Registerer already.
var ErrNameTaken = errors.New("a channel of this name is already registered")

// Register registers every collector of cs on reg, labelled
// channel_name=name, and returns the wrapped Registerer to unregister them
// from. On failure it unregisters what it registered and returns the
// error, which also matches ErrNameTaken when the name is in use. A nil reg
// registers nothing.
func Register(reg prometheus.Registerer, name string, cs []prometheus.Collector) (prometheus.Registerer, error) {
	if reg == nil {
		return nil, nil
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"channel_name": name}, reg)
	for i, x := range cs {
		if err := reg.Register(x); err != nil {
			Unregister(reg, cs[:i])
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.Join(ErrNameTaken, err)
			}
			return nil, err
		}
	}
	return reg, nil
}

// Unregister removes cs from reg (nil: nothing).
func Unregister(reg prometheus.Registerer, cs []prometheus.Collector) {
	if reg == nil {
		return
	}
	for _, x := range cs {
		reg.Unregister(x)
	}
}
