from pygpukit.cli import main

raise SystemExit(main())
