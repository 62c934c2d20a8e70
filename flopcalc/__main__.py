from flopcalc.cli import main

raise SystemExit(main())
