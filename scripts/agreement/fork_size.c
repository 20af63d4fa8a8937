/* fork + _exit(0) + waitpid on CPU 0, after touching MIB MiB of private anonymous memory and
 * mapping VMAS small extra regions: how a fork's cost grows with the parent's resident memory
 * (docs/agreement.md, "fork"). With a third argument 1 the MIB region is MADV_DONTFORK, as the
 * lab's memory walk is. Prints the fastest of 7 loops of 300, us per fork+exit+wait.
 * gcc -O2 -o fork_size fork_size.c && ./fork_size MIB VMAS [DONTFORK] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>
#include <sched.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  if(argc<3){fprintf(stderr,"usage: %s MIB VMAS [DONTFORK]\n",argv[0]);return 2;}
  int mib=atoi(argv[1]); int vmas=atoi(argv[2]); int dontfork=argc>3&&atoi(argv[3]);
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(0,&s); sched_setaffinity(0,sizeof s,&s);
  if(mib){ char*p=mmap(0,(size_t)mib<<20,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
    if(p==MAP_FAILED){perror("mmap");return 1;}
    if(dontfork) madvise(p,(size_t)mib<<20,MADV_DONTFORK);
    memset(p,1,(size_t)mib<<20);}
  for(int i=0;i<vmas;i++){ char*p=mmap(0,8192,i%2?PROT_READ:PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); if(i%2==0)p[0]=1; }
  double best=1e18;
  for(int r=0;r<7;r++){
    double t=now();
    for(int i=0;i<300;i++){pid_t c=fork(); if(!c)_exit(0); waitpid(c,0,0);}
    double d=(now()-t)/300/1000; if(d<best)best=d;
  }
  printf("%d MiB%s, %d extra vmas: %.1f us per fork+exit+wait\n",mib,dontfork?" (MADV_DONTFORK)":"",vmas,best);
}
