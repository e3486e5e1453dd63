
exit: 2
