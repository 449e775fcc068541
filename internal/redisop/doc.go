// Package redisop names the Redis operations package gate reports in
// gate.Event.Op, so the gate and its observers (gateprom's op label) share
// one list.
package redisop
