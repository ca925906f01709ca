"""The pure core: messages, the wire contract, batching, offsets, time, settings, errors. No I/O, no torch."""
