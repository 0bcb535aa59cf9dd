from acp_driver.cli import main

raise SystemExit(main())
