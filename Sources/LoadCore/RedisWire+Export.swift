// RESP moved to its own module so that the broker's Redis bus reads and writes it with the same codec; the load
// harness and its tests keep naming it through LoadCore.
@_exported import RedisWire
