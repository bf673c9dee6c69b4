#include <cstdio>
int main() { std::puts("vidax"); return 0; }
