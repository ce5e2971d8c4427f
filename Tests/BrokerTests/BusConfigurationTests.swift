import EventLoop
import TOMLConfig
import Testing

@testable import Broker

@Suite struct BusConfigurationTests {
  @Test func noBusTableIsOneBrokerAndAURLSelectsRedisWithDefaults() throws {
    #expect(try BrokerConfiguration.parse("", file: "t.toml").bus == nil)
    let bus = try #require(
      try BrokerConfiguration.parse("[bus]\nurl = \"redis://127.0.0.1:6380\"\n", file: "t.toml").bus)
    #expect(bus == BusConfiguration(address: .inet(host: "127.0.0.1", port: 6380)))
    #expect(bus.bufferBytes == 8 << 20 && bus.messageBytes == 1 << 20 && bus.connectTimeout == 5_000)
    #expect(bus.pingInterval == 5_000)
    #expect(bus.backoffBase == 100 && bus.backoffCap == 5_000 && bus.backoffReset == 10_000)
    let named = try BrokerConfiguration.parse(
      "[bus]\nurl = \"redis://redis.internal\"\nbuffer_bytes = 65536\n", file: "t.toml"
    ).bus
    #expect(named?.address == .inet(host: "redis.internal", port: 6379))
    #expect(named?.bufferBytes == 65_536)
  }

  @Test func aChangedBusNeedsARestart() throws {
    let old = try BrokerConfiguration.parse("[bus]\nurl = \"redis://127.0.0.1:6380\"\n", file: "t.toml")
    let new = try BrokerConfiguration.parse("[bus]\nurl = \"redis://127.0.0.1:6381\"\n", file: "t.toml")
    #expect(old.reloadPlan(to: new).needsRestart == ["bus"])
    #expect(old.reloaded(from: new).bus == old.bus)
  }

  @Test(arguments: [
    ("[bus]\n", "t.toml:1: bus.url: is required in [bus]"),
    ("[bus]\nurl = \"nats://127.0.0.1:4222\"\n", "t.toml:2: bus.url: must be redis://HOST:PORT"),
    (
      "[bus]\nurl = \"redis://user:pw@127.0.0.1:6379\"\n",
      "t.toml:2: bus.url: must be redis://HOST:PORT, without"
    ),
    ("[bus]\nurl = \"redis://127.0.0.1:6379/2\"\n", "t.toml:2: bus.url: must be redis://HOST:PORT, without"),
    ("[bus]\nurl = \"redis://127.0.0.1:99999\"\n", "t.toml:2: bus.url: invalid address"),
    ("[bus]\nurl = \"redis://h:1\"\nbuffer_bytes = 10\n", "t.toml:3: bus.buffer_bytes: must be from 65536"),
    ("[bus]\nurl = \"redis://h:1\"\nmessage_bytes = 10\n", "t.toml:3: bus.message_bytes: must be from 1024"),
    (
      "[bus]\nurl = \"redis://h:1\"\nbackoff_base_ms = 500\nbackoff_cap_ms = 100\n",
      "t.toml:4: bus.backoff_cap_ms: must not be below backoff_base_ms (500)"
    ),
    ("[bus]\nurl = \"redis://h:1\"\nchannels = \"pages\"\n", "t.toml:3: bus.channels: unknown key"),
  ])
  func badBusKeysAreRefusedNamingTheKey(text: String, message: String) {
    #expect {
      try BrokerConfiguration.parse(text, file: "t.toml")
    } throws: { error in
      "\(error)".hasPrefix(message)
    }
  }
}
