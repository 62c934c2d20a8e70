from flopcalc.cli.main import main

raise SystemExit(main())
