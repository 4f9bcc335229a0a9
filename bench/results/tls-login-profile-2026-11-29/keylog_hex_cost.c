#include <stdio.h>
#include <time.h>
#include <stdint.h>
int main(){char buf[1024]; unsigned char p[80]; for(int i=0;i<80;i++)p[i]=i*7;
struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a);
for(int r=0;r<100000;r++){ for(int l=0;l<5;l++){char*c=buf; for(int i=0;i<80;i++){sprintf(c,"%02x",p[i]);c+=2;}}}
clock_gettime(CLOCK_MONOTONIC,&b); printf("%.2f us per handshake (5 lines x 80 B)\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/100000/1000.0); return buf[3];}
