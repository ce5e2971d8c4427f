import PagesyncCLI

PagesyncCommand.run()
