import Daemon
import Testing

@Suite struct DaemonConfigurationTests {
  @Test func defaultsBuild() {
    _ = DaemonConfiguration()
  }
}
