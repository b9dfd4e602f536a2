package librl

import "strings"

// Slot is the Redis Cluster slot of key: CRC16 of the key's hash tag (the
// part between the first "{" and the next "}", when not empty) or of the
// whole key, modulo 16384.
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM, the cluster's key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// oneSlot refuses, before sending, a call whose keys do not share a slot:
// the cluster would answer CROSSSLOT, and the fix is a common hash tag.
func oneSlot(where string, keys []string) error {
	if len(keys) < 2 {
		return nil
	}
	first := Slot(keys[0])
	for _, k := range keys[1:] {
		if s := Slot(k); s != first {
			return argErr(where,
				"every key and override key must hash to one cluster slot, but %q is in slot %d and %q in slot %d. "+
					"Give them a common hash tag, the part of the key in braces that alone decides the slot: "+
					"use {user42}:min and {user42}:day instead of user42:min and user42:day.",
				keys[0], first, k, s)
		}
	}
	return nil
}
