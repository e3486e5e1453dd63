presets bogus
exit: 2
