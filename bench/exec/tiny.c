/* The small static program the exec audit's benchmark runs: does nothing. */
int main(void) { return 0; }
