// emu.cpp: a host check of gemv2's fragment bookkeeping (src/cuda/gemv.cu, gv2_tile and the x split
// in gemv2_kernel), written before any GPU run: mma.m16n8k16 emulated from the PTX fragment layouts,
// one 16-row tile through ks warps, against a double-precision dot product of the dequantised rows.
// A transcription of the kernel's index arithmetic, so it checks the layout reasoning, not the
// compiled kernel (tests/gpu/test_kernels.cu does that). Build: g++ -O2 -o emu dev/gemv2/emu.cpp
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
static float u2f(uint32_t u){float f;memcpy(&f,&u,4);return f;}
static uint32_t f2u(float f){uint32_t u;memcpy(&u,&f,4);return u;}
static uint32_t bf(float f){uint32_t u=f2u(f);u+=0x7fffu+((u>>16)&1u);return u>>16;}
static float lo(uint32_t w){return u2f(w<<16);} static float hi(uint32_t w){return u2f(w&0xffff0000u);}
struct Lane{uint32_t a[4],b[2];float d[4];};
static void mma(Lane *L){ // D += A B over the warp
  float A[16][16],B[16][8];
  for(int l=0;l<32;l++){int g=l>>2,q=l&3;
    A[g][2*q]=lo(L[l].a[0]);A[g][2*q+1]=hi(L[l].a[0]);A[g+8][2*q]=lo(L[l].a[1]);A[g+8][2*q+1]=hi(L[l].a[1]);
    A[g][2*q+8]=lo(L[l].a[2]);A[g][2*q+9]=hi(L[l].a[2]);A[g+8][2*q+8]=lo(L[l].a[3]);A[g+8][2*q+9]=hi(L[l].a[3]);
    B[2*q][g]=lo(L[l].b[0]);B[2*q+1][g]=hi(L[l].b[0]);B[2*q+8][g]=lo(L[l].b[1]);B[2*q+9][g]=hi(L[l].b[1]);}
  for(int l=0;l<32;l++){int g=l>>2,q=l&3;
    for(int i=0;i<4;i++){int r=g+(i>=2?8:0),n=2*q+(i&1);double s=L[l].d[i];for(int k=0;k<16;k++)s+=(double)A[r][k]*B[k][n];L[l].d[i]=(float)s;}}
}
static uint32_t pair(uint32_t s){return (s&0x00780078u)|0x3F803F80u;}
int run(int HPG,int cols,int ks,std::mt19937&rng){
  const int G=128/HPG,rows=16,NM=HPG==4?2:1,steps=cols/128,nchunk=cols/32,ng=cols/G;
  std::normal_distribution<float> nd;
  std::vector<float> x(cols);for(auto&v:x)v=nd(rng)*2;
  std::vector<uint32_t> codes(rows*cols/8);for(auto&w:codes)w=rng();
  std::vector<uint32_t> sb(rows*ng);for(auto&w:sb){float s=0.01f*(1+nd(rng)*0.1f),b=-0.08f*(1+nd(rng)*0.1f);w=bf(s)|(bf(b)<<16);}
  // fill
  std::vector<uint32_t> bsm(cols*3/8*4+4,0);std::vector<float> xsg(ng*4,0);
  for(int i=0;i<cols/8;i++){uint32_t w[3][4]={};float ps[4]={};
    for(int k=0;k<8;k++){float xv=x[8*i+k];uint32_t h=bf(xv);float hf=u2f(h<<16),r1=xv-hf;uint32_t m=bf(r1);float mf=u2f(m<<16),r2=r1-mf;uint32_t l=bf(r2);
      int sh=k<4?0:16;w[0][k&3]|=h<<sh;w[1][k&3]|=m<<sh;w[2][k&3]|=l<<sh;ps[0]+=hf;ps[1]+=mf;ps[2]+=u2f(l<<16);ps[3]+=xv;}
    int t=i>>4,p=(i>>2)&3,v=i&3;
    for(int s=0;s<3;s++)for(int j=0;j<4;j++)bsm[(((t*4+v)*12+p)+4*s)*4+j]=w[s][j];
    for(int j=0;j<4;j++)xsg[(i/(G/8))*4+j]+=ps[j];}
  const uint32_t zero_idx=cols*3/8;
  std::vector<double> part(8*16,0);
  for(int warp=0;warp<ks;warp++){ // wr = 0
    int kw=warp%ks;float acc0[32]={},acc1[32]={};
    for(int t=kw;t<steps;t+=ks){
      Lane L[NM][32];
      for(int m=0;m<NM;m++)for(int l=0;l<32;l++)for(int i=0;i<4;i++)L[m][l].d[i]=0;
      for(int v=0;v<4;v++){
        for(int l=0;l<32;l++){int g=l>>2,p=l&3;int rA=g,rB=g+8;
          uint32_t wa=codes[(rA*nchunk+p+4*t)*4+v],wb=codes[(rB*nchunk+p+4*t)*4+v];
          uint32_t a0=pair(wa<<3),b0=pair(wb<<3),a1=pair(wa>>1),b1=pair(wb>>1);
          for(int m=0;m<NM;m++){int n=g+8*m;bool live=n/HPG<3&&n%HPG==p*HPG/4;
            uint32_t idx=live?((t*4+v)*12+(n/HPG)*4+p):zero_idx; const uint32_t*bx=&bsm[idx*4];
            L[m][l].a[0]=a0;L[m][l].a[1]=b0;L[m][l].a[2]=a1;L[m][l].a[3]=b1;L[m][l].b[0]=bx[0];L[m][l].b[1]=bx[1];}
        }
        for(int m=0;m<NM;m++)mma(L[m]);
        for(int l=0;l<32;l++){int g=l>>2,p=l&3;uint32_t wa=codes[(g*nchunk+p+4*t)*4+v],wb=codes[((g+8)*nchunk+p+4*t)*4+v];
          for(int m=0;m<NM;m++){int n=g+8*m;bool live=n/HPG<3&&n%HPG==p*HPG/4;uint32_t idx=live?((t*4+v)*12+(n/HPG)*4+p):zero_idx;const uint32_t*bx=&bsm[idx*4];
            L[m][l].a[0]=pair(wa>>5);L[m][l].a[1]=pair(wb>>5);L[m][l].a[2]=pair(wa>>9);L[m][l].a[3]=pair(wb>>9);L[m][l].b[0]=bx[2];L[m][l].b[1]=bx[3];}}
        for(int m=0;m<NM;m++)mma(L[m]);
      }
      for(int l=0;l<32;l++){int g=l>>2,p=l&3;int h0=HPG==4?2*(p&1):0;
        for(int m=0;m<NM;m++)for(int e=0;e<2;e++){int n=8*m+2*p+e,pt=n/HPG,ei=HPG==1?0:e;if(pt>=3)continue;
          int grp=t*HPG+(HPG==1?0:h0+e);const float*xg=&xsg[grp*4];float xp=xg[pt];
          uint32_t sa=sb[g*ng+grp],sB=sb[(g+8)*ng+grp];(void)ei;
          acc0[l]=fmaf(u2f(sa<<16)*16.f,L[m][l].d[e]-xp,acc0[l]);acc1[l]=fmaf(u2f(sB<<16)*16.f,L[m][l].d[2+e]-xp,acc1[l]);
          if(pt==0){acc0[l]=fmaf(hi(sa),xg[3],acc0[l]);acc1[l]=fmaf(hi(sB),xg[3],acc1[l]);}}}
    }
    for(int g=0;g<8;g++){double s0=0,s1=0;for(int p=0;p<4;p++){s0+=acc0[4*g+p];s1+=acc1[4*g+p];}part[warp*16+g]=s0;part[warp*16+g+8]=s1;}
  }
  double num=0,den=0;
  for(int r=0;r<16;r++){double y=0;for(int k=0;k<ks;k++)y+=part[k*16+r];
    double ref=0,mag=0;for(int c=0;c<cols;c++){uint32_t w=codes[(r*cols+c)/8];int q=(w>>(4*(c%8)))&15;uint32_t s=sb[r*ng+c/G];double wv=(double)lo(s)*q+hi(s);ref+=wv*x[c];mag+=fabs(wv*x[c]);}
    num+=(y-ref)*(y-ref);den+=mag*mag;}
  double e=sqrt(num/den);printf("HPG=%d cols=%d ks=%d: err/|wx| %.2e %s\n",HPG,cols,ks,e,e<2e-6?"ok":"BAD");return e<2e-6;
}
int main(){std::mt19937 rng(1);int ok=1;for(int h:{1,2,4})for(int c:{128,512,2048})for(int ks:{1,4})ok&=run(h,c,ks,rng);return !ok;}
