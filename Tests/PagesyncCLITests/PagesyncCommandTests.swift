import PagesyncCLI
import Testing

@Suite struct PagesyncCommandTests {
  @Test func commandName() {
    #expect(PagesyncCommand.configuration.commandName == "pagesync")
  }
}
