import PagesyncCLI

PagesyncCommand.main()
