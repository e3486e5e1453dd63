presets models
