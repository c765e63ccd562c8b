"""``python -m bench``: whole exports under every solver strategy beside torch.export (see
strategy_exports)."""
from .strategy_exports import main

raise SystemExit(main())
